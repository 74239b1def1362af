"""A norm computed in NumPy from a recipe: the one kernel every benchmark implementation runs.

A `Recipe` says how the statistics are accumulated and where the arithmetic
rounds; the correct recipes are the textbook ones (FP64 then one rounding,
float32 two-pass, float32 Welford), and each wrong one changes exactly one
knob, so an implementation's output differs from a correct one's by one bug
class only. `normalize` works on statistics rows (`Rows`): a layer/rms row, a
group, an instance; the parameters are spread over the elements of each row.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import ml_dtypes
import numpy as np

from harness.core.dtypes import cast, np_dtype

STATS = ("exact", "two_pass", "sequential", "lanes", "welford", "welford_blocks", "one_pass", "input_dtype")
LANES = 8    # a SIMD kernel's interleaved partial sums
BLOCKS = 4   # a parallel Welford's contiguous blocks, combined by Chan's formula


@dataclass(frozen=True)
class Recipe:
    """How one implementation computes a norm; the defaults are the float32 two-pass."""

    stats: str = "two_pass"          # one of STATS: how mean and variance are accumulated
    count_dtype: str = "float64"     # the dtype the element count n is held in (float64: exact)
    unbiased: bool = False           # divide the squared deviations by n - 1
    eps: str = "inside"              # inside: 1/sqrt(var + eps); outside: 1/(sqrt(var) + eps); dropped
    rsqrt_rel_error: float = 0.0     # the relative error of the reciprocal square root
    use_weight: bool = True
    use_bias: bool = True
    flush_subnormals: bool = False   # inputs and outputs below the dtype's smallest normal become 0
    centered_dtype: str | None = None  # x - mean held in this dtype before the scaling
    weight_through: str | None = None  # the weight rounded through this dtype first
    wrong_axis: bool = False         # statistics taken along the wrong axis
    out_dtype: str | None = None     # None: the model's output dtype
    ulp_step: int = 0                # move the rounded output this many ULPs (nextafter)

    def but(self, **changes) -> "Recipe":
        return replace(self, **changes)


@dataclass(frozen=True)
class Rows:
    """The input as statistics rows (R, n), with the weight and bias spread over each element."""

    x: np.ndarray                  # (R, n), the input dtype
    weight: np.ndarray | None      # (R, n), the parameter dtype
    bias: np.ndarray | None
    centered: bool                 # False for rms_norm (no mean is subtracted)
    shape: tuple[int, ...]         # the input's shape
    order: tuple[int, ...]         # the axis permutation that made the rows
    eps: float

    @property
    def n(self) -> int:
        return self.x.shape[1]

    def back(self, y: np.ndarray) -> np.ndarray:
        """A (R, n) result back in the input's shape."""
        permuted = tuple(self.shape[a] for a in self.order)
        return np.ascontiguousarray(np.transpose(y.reshape(permuted), np.argsort(self.order)))


def _spread(v: np.ndarray | None, shape: tuple[int, ...], axis: int) -> np.ndarray | None:
    if v is None:
        return None
    view = [1] * len(shape)
    view[axis] = v.size
    return np.broadcast_to(v.reshape(view), shape)


def rows_of(spec, x: np.ndarray, weight, bias, wrong_axis: bool = False) -> Rows:
    """The statistics rows of `spec` (or of the axis a wrong implementation takes)."""
    shape = tuple(x.shape)
    if spec.pattern in ("layer_norm", "rms_norm"):
        axis = len(shape) - 1
        # wrong: normalize along the axis before the last one (all the benchmark's shapes have it)
        order = tuple(range(len(shape))) if not wrong_axis else (
            tuple(a for a in range(len(shape)) if a != len(shape) - 2) + (len(shape) - 2,))
        rows = int(np.prod(shape)) // shape[order[-1]]
    else:  # group_norm, instance_norm: (N, C, ...) with statistics per group of channels
        axis = 1
        groups = spec.groups if spec.pattern == "group_norm" else shape[1]
        if wrong_axis:  # group_norm per channel; instance_norm over all channels
            groups = shape[1] if spec.pattern == "group_norm" else 1
        order = tuple(range(len(shape)))
        rows = shape[0] * groups
    w = _spread(weight, shape, axis)
    b = _spread(bias, shape, axis)

    def view(a):
        return None if a is None else np.ascontiguousarray(np.transpose(a, order)).reshape(rows, -1)

    return Rows(view(x), view(w), view(b), spec.pattern != "rms_norm", shape, order, spec.eps)


def flush(a: np.ndarray) -> np.ndarray:
    """Subnormals of `a`'s dtype set to zero (flush-to-zero / denormals-are-zero)."""
    tiny = float(ml_dtypes.finfo(a.dtype).smallest_normal)
    return np.where(np.abs(a.astype(np.float64)) < tiny, np.zeros((), a.dtype), a).astype(a.dtype)


def _welford(xc: np.ndarray, centered: bool) -> tuple[np.ndarray, np.ndarray]:
    """Mean and biased variance, one element at a time (float32 throughout)."""
    rows, n = xc.shape
    mean = np.zeros(rows, xc.dtype)
    m2 = np.zeros(rows, xc.dtype)
    for k in range(n):
        v = xc[:, k] if centered else xc[:, k] * xc[:, k]
        delta = v - mean
        mean = mean + delta / xc.dtype.type(k + 1)
        if centered:
            m2 = m2 + delta * (v - mean)
    if not centered:  # rms: the running mean of squares is the statistic
        return np.zeros(rows, xc.dtype), mean
    return mean, m2 / xc.dtype.type(n)


def _seq_sum(a: np.ndarray) -> np.ndarray:
    """Row sums added left to right, each partial sum rounded to a's dtype."""
    return np.add.accumulate(a, axis=1, dtype=a.dtype)[:, -1]


def _lane_sum(a: np.ndarray) -> np.ndarray:
    """Row sums as a SIMD kernel adds them: LANES interleaved sequential partial sums, then the lanes."""
    rows, n = a.shape
    padded = np.zeros((rows, -(-n // LANES) * LANES), a.dtype)
    padded[:, :n] = a
    lanes = np.add.accumulate(padded.reshape(rows, -1, LANES), axis=1, dtype=a.dtype)[:, -1]
    return _seq_sum(lanes)


def _welford_blocks(xc: np.ndarray, centered: bool) -> tuple[np.ndarray, np.ndarray]:
    """Welford on BLOCKS contiguous blocks of each row, combined by Chan et al.'s pairwise update."""
    f = xc.dtype.type
    count, mean, m2 = None, None, None
    for block in np.array_split(xc, BLOCKS, axis=1):
        k = f(block.shape[1])
        if not k:
            continue
        bm, bv = _welford(block, centered)
        bm2 = bv * k
        if count is None:
            count, mean, m2 = k, bm, bm2
            continue
        total = count + k
        delta = bm - mean
        mean = mean + delta * (k / total)
        m2 = m2 + bm2 + delta * delta * (count * k / total)
        count = total
    return mean, m2 / count


def _in_dtype(x: np.ndarray, centered: bool, count) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance summed one element at a time, every operation rounding to x's dtype."""
    dt = x.dtype
    if centered:
        mean = (_seq_sum(x) / count).astype(dt)
        d = (x - mean[:, None]).astype(dt)
    else:
        mean = np.zeros(x.shape[0], dt)
        d = x
    sq = (d * d).astype(dt)
    var = (_seq_sum(sq) / count).astype(dt)
    return mean, var


def statistics(r: Recipe, rows: Rows, xc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance) per row in the compute dtype, by the recipe's accumulation."""
    f = xc.dtype.type
    count = f(cast(np.array(float(rows.n)), r.count_dtype).astype(np.float64))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if r.stats == "welford":
            mean, var = _welford(xc, rows.centered)
        elif r.stats == "welford_blocks":
            mean, var = _welford_blocks(xc, rows.centered)
        elif r.stats in ("sequential", "lanes"):
            add = _seq_sum if r.stats == "sequential" else _lane_sum
            mean = add(xc) / count if rows.centered else np.zeros(xc.shape[0], xc.dtype)
            d = xc - mean[:, None]
            var = add(d * d) / count
        elif r.stats == "input_dtype":
            mean, var = _in_dtype(rows.x, rows.centered, count.astype(rows.x.dtype))
            mean, var = mean.astype(xc.dtype), var.astype(xc.dtype)
        elif r.stats == "one_pass":
            mean = xc.sum(1) / count
            var = (xc * xc).sum(1) / count - mean * mean
        else:  # exact (float64) and two_pass (float32): the mean, then squared deviations from it
            mean = xc.sum(1) / count if rows.centered else np.zeros(xc.shape[0], xc.dtype)
            d = xc - mean[:, None]
            var = (d * d).sum(1) / count
        if r.unbiased:
            var = var * count / (count - f(1))
    return mean, var


def normalize(r: Recipe, rows: Rows, out_dtype: str) -> np.ndarray:
    """The recipe's output for `rows`, in the input's shape and `r.out_dtype or out_dtype`."""
    compute = np.float64 if r.stats == "exact" else np.float32
    f = np.dtype(compute).type
    x = flush(rows.x) if r.flush_subnormals else rows.x
    rows = replace(rows, x=x)
    xc = x.astype(compute)
    mean, var = statistics(r, rows, xc)
    eps = f(rows.eps)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if r.eps == "inside":
            rstd = f(1) / np.sqrt(var + eps)
        elif r.eps == "outside":
            rstd = f(1) / (np.sqrt(var) + eps)
        else:
            rstd = f(1) / np.sqrt(var)
        rstd = rstd * f(1.0 - r.rsqrt_rel_error)
        d = xc - mean[:, None]
        if r.centered_dtype:
            d = d.astype(np_dtype(r.centered_dtype)).astype(compute)
        y = d * rstd[:, None]
        if rows.weight is not None and r.use_weight:
            w = rows.weight if r.weight_through is None else cast(rows.weight, r.weight_through)
            y = y * w.astype(compute)
        if rows.bias is not None and r.use_bias:
            y = y + rows.bias.astype(compute)
    out = cast(rows.back(y), r.out_dtype or out_dtype)
    if r.flush_subnormals:
        out = flush(out)
    if r.ulp_step:
        toward = np.array(np.inf if r.ulp_step > 0 else -np.inf, dtype=out.dtype)
        for _ in range(abs(r.ulp_step)):
            out = np.nextafter(out, toward)
    return out
