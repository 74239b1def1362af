"""Dtype names shared by every layer: NumPy/ml_dtypes arrays, torch dtypes, ULPs.

Everything crossing a process boundary names a dtype by string
("float32", "float16", "bfloat16"); this module is the one place that maps
those names to array types and measures spacing in them.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

DTYPES = ("float32", "float16", "bfloat16")

NUMPY = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}

# (explicit mantissa bits, minimum normal exponent): spacing of 1.0 is 2**-bits.
_FORMAT = {
    "float64": (52, -1022),
    "float32": (23, -126),
    "float16": (10, -14),
    "bfloat16": (7, -126),
}

# Narrow to wide: a dtype "rounds through" the narrowest it meets.
_WIDTH = {"float16": 0, "bfloat16": 0, "float32": 2, "float64": 3}


def np_dtype(name: str) -> np.dtype:
    return NUMPY[name]


def name_of(dtype) -> str:
    """The string name of a NumPy, ml_dtypes or torch dtype."""
    text = str(dtype)
    if text.startswith("torch."):
        text = text[len("torch."):]
    aliases = {"half": "float16", "float": "float32", "double": "float64"}
    return aliases.get(text, text)


def torch_dtype(name: str):
    import torch

    return getattr(torch, name)


def unit_roundoff(name: str) -> float:
    """Relative spacing at 1.0 (the ULP of 1), 2**-mantissa_bits."""
    return 2.0 ** -_FORMAT[name][0]


def ulp(values: np.ndarray, name: str) -> np.ndarray:
    """The spacing of dtype `name` at each float64 value (subnormal aware)."""
    bits, emin = _FORMAT[name]
    v = np.abs(np.asarray(values, dtype=np.float64))
    _, exp = np.frexp(v)  # v = f * 2**exp with f in [0.5, 1); frexp(0) gives exp 0
    exp = np.where(v == 0, emin, np.maximum(exp - 1, emin))
    return np.ldexp(1.0, exp - bits)


def narrowest(*names: str) -> str:
    """The narrowest of the given dtypes (float16 before bfloat16 on a tie)."""
    order = sorted(names, key=lambda n: (_WIDTH[n], -_FORMAT[n][0]))
    return order[0]


def promote(a: str, b: str) -> str:
    """torch's type promotion between two floating dtypes."""
    if a == b:
        return a
    if {a, b} == {"float16", "bfloat16"}:
        return "float32"
    return a if _WIDTH[a] > _WIDTH[b] else b


def cast(array: np.ndarray, name: str) -> np.ndarray:
    """Round an array to dtype `name` (round to nearest even)."""
    return np.asarray(array).astype(NUMPY[name])
