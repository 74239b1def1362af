"""Pieces shared by the ExecuTorch paths (executorch, -xnnpack, -recompose*).

Everything heavy (torch.export, to_edge, lowering, serialising the program,
loading it into the runtime) happens in `prepare`; the functions returned here
only convert the input, call the compiled thing and convert the output back,
keeping whatever dtype the path really produced. The functions the repro
scripts paste (the paths' `pipeline`: pte_program, load_forward,
forward_output, graph_output, call_ops, op_name, dtype_of)
use only torch, executorch and the scripts' conversions.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import warnings
from typing import Callable

import numpy as np

from harness.core.tensors import to_numpy, to_torch
from harness.paths.base import (FRONTEND_MEMO, Prepared, dynamic_of, example_args, export_program, input_arrays,
                                stage, symbolic_facts)

# What a warm worker imports for an ExecuTorch path.
EXECUTORCH_WARM = ("torch", "torch.export", "executorch.exir", "executorch.runtime", FRONTEND_MEMO)


def quiet_imports() -> None:
    """Import executorch.exir once with its import-time warnings silenced.

    (torchao, pulled in by executorch, complains about optional CUDA extensions
    and deprecated pytree registrations on import; none of it matters here.)
    """
    import logging

    pytree_log = logging.getLogger("torch.utils._pytree")
    level = pytree_log.level
    pytree_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            import executorch.exir  # noqa: F401
    finally:
        pytree_log.setLevel(level)


def export(module, example, exported=None, spec=None):
    """export_program of `module` on its example (the "export" stage), `spec`'s dynamic dims symbolic; `exported`
    (the runner's) if given."""
    if exported is not None:
        return exported
    with stage("export"):
        return export_program(module, example_args(example), dynamic_of(spec) if spec is not None else None)


# The core-ATen decomposition to_edge makes first, of the last exported program it was made of:
# [that program, what it was made under, the decomposed program (never handed out itself)].
_DECOMPOSED: list = [None, None, None]


def decomposed_once(ep):
    """`ep` for a to_edge that adds no preserve_ops: its core-ATen decomposition (to_edge's first step, with
    ExecuTorch's default table) made once for every ET path that lowers the same exported program.

    executorch, executorch-recompose and -no-dim-order all begin with that very
    decomposition of the structure's one export (most of a to_edge); the later
    passes change the decomposed program in place, so each caller gets its own
    deep copy (the graph copied node for node, names and metadata as made). What
    is handed to to_edge is a shallow copy of `ep` whose run_decompositions
    gives that copy: `ep` itself is left as it is. A decomposition under another
    table, grad mode or size-oblivious setting is made afresh.
    """
    import copy

    import torch
    from torch.fx.experimental import _config as shape_config

    proxy = copy.copy(ep)

    def run_decompositions(decomp_table=None, decompose_custom_triton_ops=False):
        table = getattr(decomp_table, "decomp_table", decomp_table)
        made_under = (decompose_custom_triton_ops, torch.is_grad_enabled(), shape_config.backed_size_oblivious,
                      type(decomp_table), None if table is None else len(table),
                      frozenset(getattr(decomp_table, "deleted_custom_ops", ())))
        if _DECOMPOSED[0] is not ep or _DECOMPOSED[1] != made_under:
            _DECOMPOSED[:] = [None, None, None]  # the old one goes before the new one is made
            _DECOMPOSED[:] = [ep, made_under, ep.run_decompositions(decomp_table, decompose_custom_triton_ops)]
        return copy.deepcopy(_DECOMPOSED[2])

    proxy.run_decompositions = run_decompositions
    return proxy


def planned_bytes(program) -> int:
    """The bytes the .pte's memory plan sets aside for its activations (every non-constant buffer of its one
    execution plan): with symbolic dims, planned for their upper bound."""
    return sum(int(n) for plan in program.executorch_program.execution_plan for n in plan.non_const_buffer_sizes)


def pte_facts(spec, ep, program) -> dict:
    """A symbolic compile's facts (symbolic_facts) and its memory plan's size (planned_bytes); none if static."""
    facts = symbolic_facts(spec, ep)
    if facts:
        facts["pte_planned_bytes"] = planned_bytes(program)
    return facts


def op_name(target) -> str:
    """A short, stable name of an FX call_function target: "aten.mul.Tensor" (repro scripts paste it)."""
    import operator

    from torch._ops import OpOverload

    inner = target if isinstance(target, OpOverload) else getattr(target, "_op", None)  # ATen's, or an Edge op's
    if isinstance(inner, OpOverload):
        return str(inner)
    if target is operator.getitem:
        return "getitem"
    text = str(target)  # "<built-in function …>" stands for its name
    return getattr(target, "__name__", text) if text.startswith("<") else text


def load_forward(buffer: bytes):
    """The program's "forward" method, loaded by executorch.runtime from bytes.

    Returns (program, method); keep the program alive as long as the method.
    """
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(bytes(buffer))
    method = program.load_method("forward")
    if method is None:
        raise RuntimeError("the program has no method 'forward'")
    return program, method


def pte_program(manager):
    """The ExecuTorch program of an edge manager (to_executorch: its memory plan takes a symbolic dim's upper
    bound); `.buffer` is the .pte."""
    return manager.to_executorch()


def forward_output(method, inputs):
    """The loaded program's forward on `inputs` (a tuple of tensors): its one output, as NumPy (several: a
    tuple; to_numpy unwraps a one-element list)."""
    return to_numpy(method.execute(inputs))


def graph_output(graph_module, inputs):
    """A graph module run in Python on `inputs` (a tuple of tensors): its one output, as NumPy (several: a
    tuple; to_numpy unwraps a one-element list)."""
    import torch

    with torch.no_grad():
        return to_numpy(graph_module(*inputs))


class PteArtifact:
    """artifact/restore (the persistent cache) of a path whose product is a .pte program.

    The program bytes are the whole artifact: XNNPACK's delegate blobs are
    inside them, and executorch.runtime loads them as prepare does.
    """

    def artifact(self, prepared: Prepared) -> bytes | None:
        return bytes(prepared.built) if isinstance(prepared.built, (bytes, bytearray)) else None

    def restore(self, spec, data: bytes) -> Prepared:
        return Prepared(pte_runner(data, spec), {}, built=data)


def pte_runner(buffer: bytes, spec) -> Callable[[np.ndarray], np.ndarray]:
    """A .pte program loaded into the runtime ("compile").

    The returned function runs the .pte on a NumPy input (the "run" stage is
    wrapped by Prepared.run).
    """
    with stage("compile"):
        with contextlib.redirect_stderr(io.StringIO()):  # cpuinfo chatter on first load
            program, method = load_forward(buffer)
    layout = spec.layout

    def run(x: np.ndarray) -> np.ndarray:
        keep_alive = program  # noqa: F841 - the method points into the program
        inputs = tuple(to_torch(a, layout) for a in input_arrays(x))
        log = io.StringIO()
        try:
            with contextlib.redirect_stderr(log):
                return forward_output(method, inputs)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}{_kernel_failure(log.getvalue(), method, inputs)}") from None

    return run


def _kernel_failure(log: str, method, inputs) -> str:
    """Why the runtime failed (" in aten::mul.out: Check failed (...)"), from its log.

    The Python exception says just "method->execute() failed with error 0x12";
    the failing kernel and check are only logged. ExecuTorch's pybindings hand
    that log to Python's sys.stderr, which the caller captured (keeping the
    multi-line log off the user's stderr); a build that logs natively writes
    to fd 2, so then the call is repeated once with fd 2 captured.
    """
    if "KernelCall failed" not in log:
        log += _capture_stderr(lambda: method.execute(inputs))
    kernel = ""
    checks: list[str] = []
    for line in log.splitlines():
        text = line.split("] ", 1)[-1].strip().rstrip(":").strip()
        if "KernelCall failed" in text and not kernel:
            kernel = text.split(" in operator ", 1)[-1].rsplit(": ", 1)[0].strip()
        elif text.startswith(("Check failed", "Expected")) and text not in checks:
            checks.append(text)
    # the kernel's own check is logged last, after the helper's detail
    detail = "; ".join(reversed(checks[-2:]))
    if not (kernel or detail):
        return ""
    where = f" in {kernel}" if kernel else ""
    return f"{where}: {detail}" if detail else where


def _capture_stderr(fn) -> str:
    """Run fn() with sys.stderr and fd 2 both captured; the text written."""
    sys.stderr.flush()
    saved = os.dup(2)
    text = io.StringIO()
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            with contextlib.redirect_stderr(text):
                fn()
        except Exception:  # noqa: BLE001 - the failure is what we are logging
            pass
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode("utf-8", "replace") + text.getvalue()


def module_runner(module, spec) -> Callable[[np.ndarray], np.ndarray]:
    """Run a (graph) module in Python on a NumPy input."""
    layout = spec.layout
    return lambda x: graph_output(module, tuple(to_torch(a, layout) for a in input_arrays(x)))


def call_ops(graph) -> list[str]:
    """Sorted unique op names of the graph's call_function nodes."""
    return sorted({op_name(n.target) for n in graph.nodes if n.op == "call_function"})


def dtype_of(node) -> str | None:
    """The dtype name of an FX node's value (node.meta["val"]), or None: "float16" for torch.float16 (torch's
    dtypes print as torch.NAME, half as torch.float16: name_of's names, without pasting it)."""
    dtype = getattr(getattr(node, "meta", {}).get("val"), "dtype", None)
    return str(dtype).removeprefix("torch.") if dtype is not None else None
