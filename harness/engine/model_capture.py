"""A whole model run once in its dtype and once in float64, every norm instance's input captured (docs/models.md).

Runs only in a worker process (harness.engine.model_worker): the model is user
code. The model is built as a module case's class is (harness.modules.load:
seeded, moved with .to(dtype)), so an instance case that names the same class,
init and seed gets the very same weights. Each norm instance's first input is
kept in the store by its content hash (harness.core.captured); the float64 run
is a copy of the dtype model (the same rounded weights and input) and gives the
output every path's whole-model error is measured against. A model whose
captured activations outgrow the budget (`--max-memory`) stops at the instance
that did, keeping what it wrote.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np

from harness.core import captured
from harness.core.tensors import to_numpy
from harness.engine.model_whole import Whole, first_tensor, whole_model


@dataclass(frozen=True)
class Outliers:
    """Massive activations planted into the residual stream (Sun et al. 2024): `scale`× the median |activation|,
    in `channels` of the last dim, at `tokens` (positions of the second-to-last dim)."""
    scale: float = 1e4
    channels: tuple[int, ...] = ()  # () : two channels drawn from the model's seed
    tokens: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class ModelTarget:
    """What the worker builds and runs (plain data)."""
    spec: dict  # the model as a module case (class, init, dtype, shape, input, seed): how it is built
    tokens: int | None  # token ids of this length (a language model), else x drawn from the spec's input
    store: str  # the captured tensors' folder
    budget: int | None = None  # bytes the captured activations may take
    outliers: Outliers | None = None
    paths: tuple[str, ...] = ()  # the paths the whole model is compiled on


@dataclass(frozen=True)
class Instance:
    """One norm instance as the model called it first."""
    path: str
    cls: str
    dtype: str | None = None
    shape: tuple[int, ...] = ()
    sha256: str | None = None
    max_abs: float | None = None
    calls: int = 0
    note: str = ""  # why it gets no case (not called, not a floating tensor input)


@dataclass(frozen=True)
class Capture:
    instances: tuple[Instance, ...] = ()
    whole: tuple[Whole, ...] = ()
    ref_max_abs: float | None = None
    input_kind: str = ""  # "tokens" or the input object's kind
    problem: str | None = None  # one line: the model could not be built or run, or outgrew the budget
    planted: dict = field(default_factory=dict)  # the outliers as planted: value, channels, tokens, where
    usage: bool = False  # the problem is the target's: it cannot be imported or built from its init (exit 2)


class OverBudget(MemoryError):
    pass


def build_model(target: ModelTarget):
    """(the model in its dtype, its example input tensor, the module-case spec it was built from)."""
    import torch

    from harness.modules.load import build
    from harness.oracle.inputs import make_inputs
    from harness.spec import CaseSpec

    spec = CaseSpec.from_dict(target.spec)
    model = build(spec, factory=True)
    if target.tokens is not None:
        vocab = _vocab(model)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([spec.seed, 5])))
        x = torch.from_numpy(rng.integers(0, vocab, (1, target.tokens)).astype(np.int64))
    else:
        from harness.core.tensors import to_torch

        x = to_torch(make_inputs(spec).x, spec.layout)
    return model, x, spec


def _vocab(model) -> int:
    import torch

    config = getattr(model, "config", None)
    if getattr(config, "vocab_size", None):
        return int(config.vocab_size)
    for sub in model.modules():
        if isinstance(sub, torch.nn.Embedding):
            return sub.num_embeddings
    raise ValueError("--tokens needs a model with a config.vocab_size or an nn.Embedding")


def plant(model, x, outliers: Outliers, seed: int):
    """Plant the outliers: into the first nn.Embedding's output (the residual stream's start), else into x.
    Returns (x, the hook handle or None, what was planted)."""
    import torch

    emb = next((m for m in model.modules() if isinstance(m, torch.nn.Embedding)), None)
    width = emb.embedding_dim if emb is not None else x.shape[-1]
    channels = outliers.channels or tuple(sorted(int(c) for c in np.random.Generator(np.random.PCG64(
        np.random.SeedSequence([seed, 6]))).choice(width, size=min(2, width), replace=False)))
    base = emb.weight if emb is not None else x
    median = float(base.detach().abs().double().median())
    value = outliers.scale * median
    planted = {"value": value, "channels": list(channels), "tokens": list(outliers.tokens), "scale": outliers.scale,
               "median": median, "where": "the embedding's output" if emb is not None else "the model's input x"}

    def set_values(t):
        t = t.clone()
        for tok in outliers.tokens:
            for c in channels:
                t[..., tok, c] = value
        return t

    if emb is not None:
        return x, emb.register_forward_hook(lambda m, a, out: set_values(out)), planted
    return set_values(x), None, planted


def capture(target: ModelTarget) -> Capture:
    """The instances of the model, their inputs captured in the store; the whole model on each path."""
    import torch

    from harness.engine.model_norms import class_path, norm_instances

    model, x, spec = build_model(target)
    planted, handle = {}, None
    if target.outliers is not None:
        x, handle, planted = plant(model, x, target.outliers, spec.seed)
    found = norm_instances(model)
    firsts: dict[str, object] = {}
    calls: dict[str, int] = {}
    used = [0]

    def hook_of(path):
        def hook(module, args, kwargs):
            calls[path] = calls.get(path, 0) + 1
            if path in firsts:
                return
            t = args[0] if args else next(iter(kwargs.values()), None)
            if not isinstance(t, torch.Tensor) or not t.is_floating_point():
                firsts[path] = None
                return
            used[0] += t.numel() * t.element_size()
            if target.budget is not None and used[0] > target.budget:
                raise OverBudget(f"the captured activations outgrow --max-memory {target.budget / 2**30:g} GB at "
                                 f"instance {path} ({used[0]} bytes over its {len(firsts) + 1} first instances)")
            firsts[path] = t.detach().contiguous().clone()
        return hook

    hooks = [sub.register_forward_pre_hook(hook_of(p), with_kwargs=True) for p, sub in found]
    try:
        with torch.no_grad():
            out = first_tensor(model(x))
    except OverBudget as exc:
        return Capture(instances=_instances(found, firsts, calls, target, class_path, "not captured: the capture "
                                            "stopped"), problem=str(exc), planted=planted)
    finally:
        for h in hooks:
            h.remove()
    instances = _instances(found, firsts, calls, target, class_path)
    model64 = copy.deepcopy(model).to(torch.float64)
    x64 = x.double() if x.is_floating_point() else x
    with torch.no_grad():
        ref = first_tensor(model64(x64)).numpy()
    eager = to_numpy(out)
    whole = whole_model(target, spec, model, x, ref, eager)  # the planting hook stays: every path compiles it
    return Capture(instances, tuple(whole), float(np.max(np.abs(ref))) if ref.size else None,
                   "tokens" if target.tokens is not None else spec.input_dict["kind"], None, planted)


def _instances(found, firsts, calls, target, class_path, missing="not called by the model's forward"):
    out = []
    for path, sub in found:
        t = firsts.get(path, "missing")
        cls = class_path(type(sub))
        if isinstance(t, str):
            out.append(Instance(path, cls, note=missing))
            continue
        if t is None:
            out.append(Instance(path, cls, calls=calls.get(path, 0), note="its input is not a floating tensor"))
            continue
        array = to_numpy(t)
        hexd = captured.put(target.store, array)
        big = float(np.max(np.abs(array.astype(np.float64)))) if array.size else 0.0
        out.append(Instance(path, cls, str(t.dtype).removeprefix("torch."), tuple(t.shape), hexd,
                            big if math.isfinite(big) else None, calls.get(path, 0)))
    return tuple(out)
