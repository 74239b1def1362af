"""A norm's backward computed in NumPy from a recipe: the one kernel every gradient implementation runs.

The backward of a layer, rms or group norm (the catalog's `module` style) on
the case's input `x` and cotangent `dy`: the statistics recomputed (two-pass
or Welford), the input gradient from the row sums of g = dy·w and g·x̂, the
weight and bias gradients summed over every element of their channel. A
correct recipe computes in float32 (or float64) and rounds each gradient once
to its tensor's dtype; each wrong recipe changes one knob, a bug class
kernels have shipped (docs/oracle-check.md#the-gradient-benchmark):

* `weight_sum_in_dtype`: d_weight and d_bias accumulated row after row in the
  input's dtype (pytorch/pytorch#147303, karpathy/llm.c#428, Liger-Kernel#950);
* `saved_in_dtype`: the forward's saved mean and rstd rounded to the dtype
  (torch's CPU kernels; what the lifted backward refuses to grant);
* `inv_n_in_dtype`, `two_n_in_dtype`: 1/N, or the variance path's 2/N, held
  in the dtype (pytorch/pytorch#190243, #180740: no upcast);
* `backward_in_dtype`: the forward's statistics in float32 but every
  operation of the backward rounded to the dtype (an upcast dropped in the
  backward only); `row_sums_in_dtype`: only the input gradient's row sums.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from harness.core.dtypes import cast

STATS = ("two_pass", "welford")
SUMS = ("pairwise", "sequential")
FORMS = ("mean", "var_path")  # d_x through the means of g and g·x̂, or through dvar·2/N and dmean·1/N


@dataclass(frozen=True)
class GradRecipe:
    """How one implementation computes a norm's backward; the defaults are float32 two-pass, pairwise sums."""

    stats: str = "two_pass"
    sums: str = "pairwise"
    acc: str = "float32"               # the backward's arithmetic (float64: the exact result, rounded once)
    form: str = "mean"
    saved_in_dtype: tuple[str, ...] = ()  # which saved statistics ("mean", "rstd") are rounded to the dtype
    weight_sum_in_dtype: bool = False
    inv_n_in_dtype: bool = False
    two_n_in_dtype: bool = False
    backward_in_dtype: bool = False
    row_sums_in_dtype: bool = False


@dataclass(frozen=True)
class Layout:
    """Where a pattern's statistics and parameters sit in x's shape."""
    pattern: str
    eps: float
    groups: int | None

    def channel_axis(self, ndim: int) -> int:
        return ndim - 1 if self.pattern in ("layer_norm", "rms_norm") else 1

    def stats_rows(self, a: np.ndarray) -> np.ndarray:
        if self.pattern in ("layer_norm", "rms_norm"):
            return a.reshape(-1, a.shape[-1])
        return a.reshape(a.shape[0] * self.groups, -1)

    @property
    def centered(self) -> bool:
        return self.pattern != "rms_norm"


def _seq_rows(a: np.ndarray, dtype) -> np.ndarray:
    """Each row of `a` (R, n) added left to right, every partial sum rounded to `dtype`."""
    return np.add.accumulate(a.astype(dtype), axis=1, dtype=dtype)[:, -1]


def _row_sum(a: np.ndarray, recipe: GradRecipe, dtype) -> np.ndarray:
    if recipe.sums == "sequential" or dtype != a.dtype:
        return _seq_rows(a, dtype).astype(a.dtype)
    return a.sum(1, dtype=a.dtype)


def _channel_sum(a: np.ndarray, axis: int, recipe: GradRecipe, dtype) -> np.ndarray:
    """The sum over every element of each channel (axis `axis`), in `recipe`'s order and `dtype`."""
    cols = np.moveaxis(a, axis, -1).reshape(-1, a.shape[axis]).T  # (C, elements)
    return _row_sum(np.ascontiguousarray(cols), recipe, dtype)


def _welford(rows: np.ndarray, centered: bool) -> tuple[np.ndarray, np.ndarray]:
    """Mean and biased variance (or the mean of squares), one element at a time, in rows' dtype."""
    f = rows.dtype.type
    mean, m2 = np.zeros(rows.shape[0], rows.dtype), np.zeros(rows.shape[0], rows.dtype)
    for k in range(rows.shape[1]):
        v = rows[:, k] if centered else rows[:, k] * rows[:, k]
        delta = v - mean
        mean = mean + delta / f(k + 1)
        if centered:
            m2 = m2 + delta * (v - mean)
    return (mean, m2 / f(rows.shape[1])) if centered else (np.zeros_like(mean), mean)


def _statistics(rows: np.ndarray, layout: Layout, recipe: GradRecipe) -> tuple[np.ndarray, np.ndarray]:
    """(mean, variance or mean of squares) of each statistics row, in rows' dtype."""
    if recipe.stats == "welford":
        return _welford(rows, layout.centered)
    n = rows.dtype.type(rows.shape[1])
    if not layout.centered:
        return np.zeros(rows.shape[0], rows.dtype), _row_sum(rows * rows, recipe, rows.dtype) / n
    mean = _row_sum(rows, recipe, rows.dtype) / n
    d = rows - mean[:, None]
    return mean, _row_sum(d * d, recipe, rows.dtype) / n


def _spread(v: np.ndarray | None, shape: tuple[int, ...], axis: int, acc) -> np.ndarray:
    if v is None:
        return np.ones(shape, acc)
    view = [1] * len(shape)
    view[axis] = v.size
    return np.broadcast_to(v.astype(acc).reshape(view), shape)


def _round(a: np.ndarray, dtype) -> np.ndarray:
    """`a` rounded once (from its float64 value) to `dtype`."""
    return cast(a.astype(np.float64), np.dtype(dtype).name)


def backward(recipe: GradRecipe, layout: Layout, x: np.ndarray, dy: np.ndarray, weight, bias) -> tuple:
    """(d_x, d_weight, d_bias) of the norm (those of its parameters it has), each in its tensor's dtype."""
    acc = np.dtype(recipe.acc)
    low = ml_dtypes.finfo(x.dtype).dtype if x.dtype != np.float32 else np.dtype(np.float32)

    def r(a):  # an operation of the backward: rounded to the dtype when its upcast is dropped
        return a.astype(low).astype(acc) if recipe.backward_in_dtype else a

    def held(value: float, in_dtype: bool):
        return acc.type(cast(np.float64(value), x.dtype.name)) if in_dtype else acc.type(value)

    sum_dtype = low if recipe.backward_in_dtype else acc
    axis = layout.channel_axis(x.ndim)
    rows = layout.stats_rows(x.astype(acc))
    n = rows.shape[1]
    mean, var = _statistics(rows, layout, recipe)
    rstd = (acc.type(1) / np.sqrt(var + acc.type(layout.eps))).astype(acc)
    if "mean" in recipe.saved_in_dtype:
        mean = mean.astype(low).astype(acc)
    if "rstd" in recipe.saved_in_dtype:
        rstd = rstd.astype(low).astype(acc)
    centered = rows - mean[:, None] if layout.centered else rows
    xhat_rows = r(r(centered) * rstd[:, None])
    g = r(dy.astype(acc) * _spread(weight, x.shape, axis, acc))
    g_rows = layout.stats_rows(g)
    inv_n = held(1.0 / n, recipe.inv_n_in_dtype)
    row_dtype = low if recipe.row_sums_in_dtype else sum_dtype
    if recipe.form == "mean":
        s1 = _row_sum(g_rows, recipe, row_dtype) if layout.centered else 0.0
        s2 = _row_sum(r(g_rows * xhat_rows), recipe, row_dtype)
        inner = r(g_rows - r(r(s1 * inv_n)[:, None] if layout.centered else 0.0)) - r(xhat_rows * r(s2 * inv_n)[:, None])
        dx_rows = r(rstd[:, None] * r(inner))
    else:  # dx = rstd·g + dvar·(2/N)·(x - mean) + dmean·(1/N), dvar = -rstd³/2 · Σ g·(x - mean)
        two_n = held(2.0 / n, recipe.two_n_in_dtype)
        dvar = r(acc.type(-0.5) * rstd ** 3 * _row_sum(r(g_rows * r(centered)), recipe, row_dtype))
        dx_rows = r(r(rstd[:, None] * g_rows) + r(r(dvar * two_n)[:, None] * r(centered)))
        if layout.centered:
            dmean = r(-rstd * _row_sum(g_rows, recipe, row_dtype))
            dx_rows = r(dx_rows + r(dmean * inv_n)[:, None])
    dx = _round(dx_rows.reshape(x.shape), x.dtype)
    xhat = xhat_rows.reshape(x.shape)
    param_sum = low if recipe.weight_sum_in_dtype else sum_dtype
    out = [dx]
    if weight is not None:
        out.append(_round(_channel_sum(r(dy.astype(acc) * xhat), axis, recipe, param_sum), weight.dtype))
    if bias is not None:
        out.append(_round(_channel_sum(dy.astype(acc), axis, recipe, param_sum), bias.dtype))
    return tuple(out)
