"""The lift check: the lifted program's FP64 output against the module itself run in float64.

The module is copied, moved to float64 with `.double()`, and run on float64
copies of the case's rounded inputs under a torch function mode that maps
every cast the model code writes to a float dtype (`.to(torch.float32)`,
`.float()`, `.half()`, `dtype=`) onto float64, so it computes its own
mathematics without rounding, as the interpreter does. The two agree to
float64 rounding when the lift is right: that is ~2^-29 of what the bound
grants a float32 computation, so the rule is a share of the bound
(LIFT_SHARE); `lift_check` itself is the largest difference relative to
the largest |output|. A module that does not run in float64 is not checked,
and its record says so.
"""
from __future__ import annotations

import copy

import numpy as np

from harness.core.eps import TORCH_RMS_NONE_EPS

LIFT_SHARE = 1e-3  # a difference over this share of the program's bound anywhere is a wrong lift


def _float64_mode():
    import torch
    from torch.overrides import TorchFunctionMode

    floats = (torch.float32, torch.float16, torch.bfloat16)
    narrowing = {torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16}

    class Float64(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in narrowing:
                return args[0].double()
            if func is torch.nn.functional.rms_norm:  # eps=None adds float32's eps in every dtype, not float64's
                if len(args) > 3 and args[3] is None:
                    args = (*args[:3], TORCH_RMS_NONE_EPS, *args[4:])
                elif len(args) <= 3 and kwargs.get("eps") is None:
                    kwargs["eps"] = TORCH_RMS_NONE_EPS
            args = tuple(torch.float64 if a in floats else a for a in args)
            if kwargs.get("dtype") in floats:
                kwargs["dtype"] = torch.float64
            return func(*args, **kwargs)

    return Float64()


def module_float64(module, tensors, keywords: tuple[str, ...] = ()):
    """The module's output computed in float64 (NumPy; a tuple of arrays for a forward returning several), or
    the reason it cannot be."""
    import torch

    from harness.core.tensors import to_numpy

    try:
        twin = copy.deepcopy(module).double()
        args = [t.double() for t in tensors]
        with torch.no_grad(), _float64_mode():
            positional, named = args[:len(args) - len(keywords)], dict(zip(keywords, args[len(args) - len(keywords):]))
            out = twin(*positional, **named)
    except Exception as exc:  # noqa: BLE001 - "wherever .double() works"
        text = (str(exc).strip() or type(exc).__name__).splitlines()[0][:200]
        return None, f"the module does not run in float64 ({type(exc).__name__}: {text})"
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        return None, f"the module returns {type(out).__name__} in float64"
    arrays = tuple(to_numpy(o).astype(np.float64) for o in outs)
    return (arrays[0] if len(arrays) == 1 else arrays), None


def compare(ref: np.ndarray, bound: np.ndarray, other: np.ndarray) -> tuple[float, float]:
    """(max |other - ref| / max |ref|, max |other - ref| / bound) over the elements; inf where one is
    non-finite and the other is not."""
    if ref.shape != other.shape:
        return float("inf"), float("inf")
    both = np.isfinite(ref) & np.isfinite(other)
    if (np.isfinite(ref) != np.isfinite(other)).any():
        return float("inf"), float("inf")
    if not both.any():
        return 0.0, 0.0
    diff = np.abs(other[both] - ref[both])
    scale = float(np.abs(ref[both]).max())
    rel = float(diff.max() / scale) if scale > 0 else (0.0 if diff.max() == 0 else float("inf"))
    b = np.asarray(np.broadcast_to(bound, ref.shape))[both]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(diff == 0, 0.0, diff / b)
    return rel, float(np.nan_to_num(share, nan=np.inf).max())
