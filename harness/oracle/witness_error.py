"""What correct float32 implementations achieve on a case's very rows: the measured accumulation error.

The bound's accumulation term (compare.tolerance: C_ACC·√n·u₃₂ per unit of
κ + |z|) is an a-priori random-walk estimate. It is loose where the rounding
errors of a sum cancel (any bug under it goes unseen) and too tight where they
add coherently (a correct sequential float32 sum on a row of repeated values
drifts past it). So the comparator also measures, on the case's own rows, the
accumulation error of the float32 algorithms compilers and kernels actually
emit, and holds an implementation to a multiple of the worst of them:

* two-pass, each sum added left to right (a scalar loop: TVM's lowering);
* Welford, one element at a time (Inductor's and ATen's running statistics);
* two-pass with pairwise sums (NumPy's reduction, a tree like eager's).

Each is correct float32 arithmetic by construction. Only its statistics are
taken: z is rebuilt from them in float64, so the error measured is the
accumulation's alone (the per-element roundings are the bound's own
C_OUT/C_ROUND terms).

A program (or a module case's lifted program) has no closed-form z: its
witnesses are the program itself run by correct implementations in its own
dtypes (harness.program.witness_run), and `program_witnesses` hands the
comparator their outputs on demand, computed once per case in a process.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Callable

import numpy as np

from harness.program import witness_run as program_witness

ALGORITHMS = ("sequential two-pass", "sequential Welford", "pairwise two-pass")


def _sequential_sum(a: np.ndarray) -> np.ndarray:
    return np.add.accumulate(a, axis=1, dtype=np.float32)[:, -1]


def _two_pass(x: np.ndarray, centered: bool, add) -> tuple[np.ndarray, np.ndarray]:
    n = np.float32(x.shape[1])
    mean = add(x) / n if centered else np.zeros(x.shape[0], np.float32)
    d = x - mean[:, None]
    return mean, add(d * d) / n


def _welford(x: np.ndarray, centered: bool) -> tuple[np.ndarray, np.ndarray]:
    rows, n = x.shape
    mean = np.zeros(rows, np.float32)
    m2 = np.zeros(rows, np.float32)
    for k in range(n):
        v = x[:, k] if centered else x[:, k] * x[:, k]
        delta = v - mean
        mean = mean + delta / np.float32(k + 1)
        if centered:
            m2 = m2 + delta * (v - mean)
    if not centered:  # rms: the running mean of squares is the statistic
        return np.zeros(rows, np.float32), mean
    return mean, m2 / np.float32(n)


def statistics(x: np.ndarray, centered: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """(mean, variance) per row by each of ALGORITHMS, in float32."""
    x = x.astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        return [
            _two_pass(x, centered, _sequential_sum),
            _welford(x, centered),
            _two_pass(x, centered, lambda a: a.sum(1, dtype=np.float32)),
        ]


def accumulation_units(x: np.ndarray, z: np.ndarray, kappa: np.ndarray, centered: bool, eps: float) -> np.ndarray:
    """Per row of `x` (R, n), the largest |z_w - z| / (κ + |z|) over the witnesses: their accumulation error
    in the units of the bound's accumulation term. `z` and `kappa` are the reference's, as (R, n)."""
    x64 = x.astype(np.float64)
    worst = np.zeros(x.shape[0])
    scale = kappa + np.abs(z)
    for mean, var in statistics(x, centered):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            zw = (x64 - mean.astype(np.float64)[:, None]) / np.sqrt(var.astype(np.float64)[:, None] + eps)
            units = np.abs(zw - z) / scale
        units = np.where(scale > 0, units, np.where(np.abs(zw - z) > 0, np.inf, 0.0))
        worst = np.maximum(worst, np.nan_to_num(units, nan=np.inf).max(1))
    return worst


# The last few cases' program witness outputs, by case key and input bytes: a run scores every path
# of a case in turn, and each path's record rebuilds the reference (the outputs do not change).
CACHE_SIZE = 8
_PROGRAM_OUTPUTS: OrderedDict = OrderedDict()


def program_witnesses(key: str, program, case, arrays: dict) -> Callable[[], tuple[np.ndarray, ...]]:
    """() -> each program witness's output (harness.program.witness_run.WITNESSES) on `arrays`, computed on
    first call and kept for the last CACHE_SIZE keys; () when a walk meets an op the witnesses have no
    NumPy form for (the comparator then falls back on the bound)."""

    digest = hashlib.blake2b(key.encode(), digest_size=16)
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}:{a.dtype}:{a.shape}".encode())
        digest.update(a.tobytes())
    key = digest.hexdigest()

    def outputs() -> tuple[np.ndarray, ...]:
        if key in _PROGRAM_OUTPUTS:
            _PROGRAM_OUTPUTS.move_to_end(key)
            return _PROGRAM_OUTPUTS[key]
        try:
            got = tuple(y for _, y in program_witness.outputs(program, case, arrays))
        except NotImplementedError:
            got = ()
        _PROGRAM_OUTPUTS[key] = got
        while len(_PROGRAM_OUTPUTS) > CACHE_SIZE:
            _PROGRAM_OUTPUTS.popitem(last=False)
        return got

    return outputs
