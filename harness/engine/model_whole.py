"""The whole model compiled on each path, its output against the float64 model's (docs/models.md).

Each path's own `prepare` compiles the whole model (wrapped to return one
tensor: a language model's logits) as it compiles a norm; its output's largest
error relative to the float64 model's largest |output| sits beside eager's.
No verdict: a whole model's error bound is not derived (its attention, its
embedding and its masks are outside the program language, and the error a
random-weight model's logits carry says nothing of a bound), so the error is
shown, never judged.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.tensors import to_numpy


@dataclass(frozen=True)
class Whole:
    """The whole model's output on one path against the float64 model's: relative max error, no verdict."""
    path: str
    rel_err: float | None = None
    max_abs_err: float | None = None
    out_dtype: str | None = None
    failure: str | None = None  # why the path gave no output (its stage's one line)


class Outputs:
    """model(x) -> one tensor: a language model's logits, a tuple's first tensor (what every path compiles)."""

    def __new__(cls, inner):
        import torch

        class Output(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return first_tensor(self.inner(x))

        return Output().eval()


def first_tensor(out):
    import torch

    if isinstance(out, torch.Tensor):
        return out
    for name in ("logits", "last_hidden_state"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    items = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else ()
    for item in items:
        if isinstance(item, torch.Tensor):
            return item
    raise TypeError(f"the model returns a {type(out).__name__} holding no tensor")


def relative(out: np.ndarray, ref: np.ndarray) -> tuple[float | None, float | None]:
    """(max |out - ref| / max |ref|, max |out - ref|), None where shapes differ or the error is not finite."""
    if out.shape != ref.shape:
        return None, None
    err = float(np.max(np.abs(out.astype(np.float64) - ref))) if ref.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    if not np.isfinite(err):
        return None, None
    return (err / scale if scale else err), err


def whole_model(target, spec, model, x, ref: np.ndarray, eager: np.ndarray) -> list:
    """One Whole per path of `target.paths` (eager first, from the run already made; `eager` as it came out)."""
    from harness import paths
    from harness.paths.base import StageError, first_line

    rel, err = relative(eager, ref)
    out = [Whole("eager", rel, err, str(eager.dtype))]
    wrapped = Outputs(model)
    arg = to_numpy(x)
    for name in target.paths:
        if name == "eager":
            continue
        try:
            path = paths.get(name)
            prepared = path.prepare(spec, wrapped, (x,))
            got = prepared.run(arg)
            got = got[0] if isinstance(got, tuple) else got
            rel, err = relative(np.asarray(got), ref)
            out.append(Whole(name, rel, err, str(np.asarray(got).dtype),
                             None if rel is not None else "shape or non-finite output"))
        except Exception as exc:  # noqa: BLE001 - a path that cannot compile the whole model says why, in one line
            why = f"{exc.stage}: {exc.message.splitlines()[0] if exc.message else ''}" \
                if isinstance(exc, StageError) else first_line(exc)
            out.append(Whole(name, failure=why[:300]))
    return out
