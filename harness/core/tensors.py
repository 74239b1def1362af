"""NumPy <-> torch conversion that keeps bfloat16 bits and the spec's layout.

Repro scripts carry these functions as their source (harness.repro.pieces,
inspect.getsource): they use only numpy, ml_dtypes and torch.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np


def to_torch(x: np.ndarray, layout: str = "contiguous"):
    """A torch tensor with exactly the bits of `x` (bfloat16 included)."""
    import torch

    if x.dtype == np.dtype(ml_dtypes.bfloat16):
        t = torch.from_numpy(np.ascontiguousarray(x).view(np.int16).copy()).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(x).copy())
    if layout == "channels_last" and t.dim() == 4:
        t = t.contiguous(memory_format=torch.channels_last)
    return t


def to_numpy(t) -> np.ndarray:
    """A NumPy array (logical order) with exactly the bits of tensor `t`; for a tuple or list of several tensors
    (a model of several outputs), a tuple of them (a one-element one is its element)."""
    import torch

    t = single(t)
    if isinstance(t, (list, tuple)):
        return tuple(to_numpy(item) for item in t)
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return t.numpy().copy()


def single(out):
    """The one output of a graph that returns a one-element list or tuple (nested ones too)."""
    while isinstance(out, (list, tuple)) and len(out) == 1:
        out = out[0]
    return out
