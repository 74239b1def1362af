"""Worker side of the probe: import, build, move, run and export one module spec (runs only in a child).

This is the only zoo module that imports torch and the library's classes, and it is imported only by
the probe's child processes. Each step that fails gives one line naming the step (`stage`) and the
exception. Until the module cases of DESIGN §8 land, this stands in for their worker-side resolution.
Inputs are normal draws: the input kind of a spec does not change what is built or exported.
"""
from __future__ import annotations

import importlib
import os
import sys
import time

STAGES = ("import", "config", "build", "params", "to", "forward", "export")


class StageError(Exception):
    def __init__(self, stage: str, exc: BaseException):
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        super().__init__(f"{type(exc).__name__}: {text}"[:300])
        self.stage = stage


def _stage(name, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure of user code is this step's one-line reason
        raise StageError(name, exc) from exc


def _import(target: str):
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _config(obj: dict):
    fields = dict(obj)
    cls = _import(fields.pop("class"))
    return cls(**fields)


def _redraw(torch, module, kind: str, seed: int) -> None:
    """Every floating parameter and buffer, in name order, redrawn from the seed (DESIGN §8 `params`)."""
    gen = torch.Generator().manual_seed(seed)
    tensors = sorted(list(module.named_parameters()) + list(module.named_buffers()), key=lambda kv: kv[0])
    with torch.no_grad():
        for _, t in tensors:
            if t.is_floating_point():
                t.copy_(torch.ones_like(t) if kind == "ones" else torch.randn(t.shape, generator=gen, dtype=t.dtype))


def _finite(torch, out) -> bool:
    if isinstance(out, torch.Tensor):
        return bool(torch.isfinite(out.float()).all())
    if isinstance(out, (tuple, list)):
        return all(_finite(torch, o) for o in out if isinstance(o, torch.Tensor))
    return True


def _inputs(torch, spec: dict):
    dtype = getattr(torch, spec["dtype"])
    gen = torch.Generator().manual_seed(spec.get("seed", 0))
    x = torch.randn(spec["shape"], generator=gen).to(dtype)
    extras = {}
    for name, obj in (spec.get("inputs") or {}).items():
        extras[name] = torch.randn(obj.get("shape", spec["shape"]), generator=gen).to(getattr(torch, obj.get("dtype", spec["dtype"])))
    return x, extras


def build(spec: dict):
    """(module, x, extra inputs) of a spec, or StageError naming the step that failed."""
    import torch

    cls = _stage("import", _import, spec["class"])
    init = dict(spec.get("init") or {})
    if isinstance(init.get("config"), dict):
        init["config"] = _stage("config", _config, init["config"])
    torch.manual_seed(spec.get("seed", 0))
    module = _stage("build", cls, **init)
    if not isinstance(module, torch.nn.Module):
        raise StageError("build", TypeError(f"{spec['class']} is not a torch.nn.Module"))
    module.eval()
    kind = (spec.get("params") or {}).get("kind", "init")
    if kind != "init":
        _stage("params", _redraw, torch, module, kind, spec.get("seed", 0))
    module = _stage("to", module.to, getattr(torch, spec.get("weight_dtype", spec["dtype"])))
    x, extras = _inputs(torch, spec)
    return module, x, extras


def graph_ops(ep) -> list[str]:
    """The ATen ops of an exported program's graph, by overload (`aten.pow.Tensor_Scalar`)."""
    return sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"})


def probe_one(spec: dict) -> dict:
    """One plain-data record: status exported | built | failed, the failing stage and its reason, the ops."""
    import torch

    t0 = time.perf_counter()
    rec = {"class": spec["class"], "dtype": spec["dtype"], "status": "failed", "stage": "", "reason": "",
           "ops": [], "finite": None, "double": None}
    try:
        module, x, extras = build(spec)
        with torch.no_grad():
            out = _stage("forward", module, x, **extras)
        rec["finite"] = _finite(torch, out)
        rec["status"] = "built"
        ep = _stage("export", torch.export.export, module, (x,), kwargs=extras or None)
        rec["ops"] = graph_ops(ep)
        rec["status"] = "exported"
        rec["double"] = _double_runs(torch, module, x, extras)
    except StageError as exc:
        rec["stage"], rec["reason"] = exc.stage, str(exc)
    rec["seconds"] = round(time.perf_counter() - t0, 3)
    return rec


def _double_runs(torch, module, x, extras) -> bool | str:
    """Whether the module runs in float64 (the lift check of DESIGN §8 needs `.double()`)."""
    try:
        m64 = module.double()
        with torch.no_grad():
            out = m64(x.double(), **{k: v.double() for k, v in extras.items()})
        return bool(_finite(torch, out)) or "non-finite float64 output"
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:200]


def serve(conn, sys_path: str | None, log: str | None = None) -> None:
    """The child's loop: say ready, then answer one spec at a time until told to stop (None).

    The library's import-time chatter (warnings, optional kernels that fail to load) goes to `log`."""
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    if sys_path and sys_path not in sys.path:
        sys.path.insert(0, sys_path)
    import torch  # noqa: F401 - paid once per child, before the first timed task

    conn.send({"ready": True})
    while True:
        task = conn.recv()
        if task is None:
            break
        try:
            rec = probe_one(task["spec"])
        except BaseException as exc:  # noqa: BLE001 - the record says so; the child goes on
            rec = {"class": task["spec"].get("class"), "dtype": task["spec"].get("dtype"), "status": "failed",
                   "stage": "probe", "reason": f"{type(exc).__name__}: {exc}"[:300], "ops": []}
        rec["id"] = task["id"]
        conn.send(rec)

