"""The ops around a norm (docs/contracts.md §7, the op table's "call" rows): their shape rules, NumPy forms and
error-bound rules.

matmul, softmax, cumsum, gelu, elu, hardswish, the pools, nearest interpolate, clamp and ones_like take
options (a dim, a kernel size, a form), so each is one IR node, `Call`, whose options are normalised by
the parser; the op table (ops.py) names each op's spellings, options and these functions. Everything here
is NumPy and the bound rules of bounds.py: the FP64 reference (interpret.py) and the witnesses
(witness_run.py) share the index arithmetic (pool windows, nearest indices), so they read the same
elements.

A shape rule is `(shapes, options, fail) -> result shape` (`fail(what)` raises the program's one-line
error); a bound rule is `(values, errs, options) -> (FP64 value, propagated error)`, before the result's
rounding into its dtype, which the interpreter adds unless the op is exact.
"""
from __future__ import annotations

import math

import numpy as np

from harness.program import bounds

# max |gelu'(t)| over the reals (erf form: Φ(t) + tφ(t) peaks at 1.1289 near t = 1.41; the tanh form's
# within 1e-3 of it): valid on every interval, as SILU_SLOPE.
GELU_SLOPE = 1.13
# max |hardswish'(t)| = (2t + 3)/6 at t = 3
HARDSWISH_SLOPE = 1.5


def axis(d: int, rank: int, fail, what: str) -> int:
    """Dim `d` of a tensor of `rank` as an index (torch's wrap-around); `fail` names an out-of-range one. The one
    rule of every dim argument (ops.py's shape ops read it too)."""
    if not -max(rank, 1) <= d < max(rank, 1):
        fail(f"dim {d} is out of range for a tensor of rank {rank} in {what}")
    return d % max(rank, 1)


# ------------------------------------------------------------------------------------------ shape rules
def matmul_shape(shapes, options, fail):
    """torch.matmul's shapes: 1-D operands are a vector (a dim added, then dropped); the rest broadcast."""
    a, b = shapes
    if not a or not b:
        fail("matmul: both operands need at least one dim")
    ea, eb = (1,) + a if len(a) == 1 else a, b + (1,) if len(b) == 1 else b
    if ea[-1] != eb[-2]:
        fail(f"matmul: shapes {list(a)} and {list(b)} cannot be multiplied ({ea[-1]} != {eb[-2]})")
    lead_a, lead_b = ea[:-2], eb[:-2]
    lead = []
    for i in range(1, max(len(lead_a), len(lead_b)) + 1):
        m = lead_a[-i] if i <= len(lead_a) else 1
        n = lead_b[-i] if i <= len(lead_b) else 1
        if m != n and 1 not in (m, n):
            fail(f"matmul: batch dims of {list(a)} and {list(b)} do not broadcast")
        lead.append(max(m, n))
    out = tuple(reversed(lead)) + ((ea[-2],) if len(a) > 1 else ()) + ((eb[-1],) if len(b) > 1 else ())
    return out


def along_shape(shapes, options, fail, what="softmax"):
    (a,) = shapes
    axis(options["dim"], len(a), fail, what)
    return a


def same_shape(shapes, options, fail):
    return shapes[0]


def _spatial(value, n: int, what: str, fail) -> tuple[int, ...]:
    items = tuple(value) if isinstance(value, tuple) else (value,) * n
    if len(items) == 1:
        items = items * n
    if len(items) != n:
        fail(f"{what} must be an int or {n} ints, got {list(items)}")
    return items


def pool_geometry(shape, options, n: int, fail):
    """(kernel, stride, padding, output spatial sizes) of an n-d pool over the last n dims."""
    kernel = _spatial(options["kernel_size"], n, "kernel_size", fail)
    stride = kernel if options["stride"] in (None, ()) else _spatial(options["stride"], n, "stride", fail)
    padding = _spatial(options["padding"], n, "padding", fail)
    if any(k < 1 for k in kernel) or any(s < 1 for s in stride) or any(p < 0 for p in padding):
        fail(f"pool: kernel_size {list(kernel)}, stride {list(stride)}, padding {list(padding)} must be "
             "positive (padding >= 0)")
    if any(2 * p > k for p, k in zip(padding, kernel)):
        fail(f"pool: padding {list(padding)} should be at most half of kernel_size {list(kernel)}")
    sizes = tuple(shape[-n:])
    out = tuple((size + 2 * p - k) // s + 1 for size, k, s, p in zip(sizes, kernel, stride, padding))
    if any(o < 1 for o in out):
        fail(f"pool: kernel_size {list(kernel)} is larger than the padded input {list(sizes)}")
    return kernel, stride, padding, out


def pool_shape(n: int):
    def rule(shapes, options, fail):
        (a,) = shapes
        if len(a) not in (n + 1, n + 2):
            fail(f"{n}-d pool needs a tensor of rank {n + 1} or {n + 2}, got rank {len(a)}")
        return tuple(a[:-n]) + pool_geometry(a, options, n, fail)[3]
    return rule


def interpolate_sizes(shape, options, fail):
    """The output spatial sizes of nearest interpolation (rank 3, 4 or 5: 1 to 3 spatial dims)."""
    if len(shape) not in (3, 4, 5):
        fail(f"interpolate needs a tensor of rank 3, 4 or 5, got rank {len(shape)}")
    n = len(shape) - 2
    size, scale = options["size"], options["scale_factor"]
    if (size is None) == (scale is None):
        fail("interpolate: give exactly one of size and scale_factor")
    if size is not None:
        out = _spatial(size, n, "size", fail)
    else:
        scales = _spatial(scale, n, "scale_factor", fail)
        out = tuple(int(math.floor(s * f)) for s, f in zip(shape[2:], scales))
    if any(o < 1 for o in out):
        fail(f"interpolate: output size {list(out)} must be positive")
    return out


def interpolate_shape(shapes, options, fail):
    (a,) = shapes
    return tuple(a[:2]) + interpolate_sizes(a, options, fail)


# ---------------------------------------------------------------------------------- shared index math
def pool_windows(a: np.ndarray, n: int, kernel, stride, padding, fill: float) -> np.ndarray:
    """(..., out_1, …, out_n, k_1·…·k_n): each output's window over the last n dims, padded with `fill`."""
    pad = [(0, 0)] * (a.ndim - n) + [(p, p) for p in padding]
    padded = np.pad(a, pad, constant_values=fill)
    axes = tuple(range(a.ndim - n, a.ndim))
    win = np.lib.stride_tricks.sliding_window_view(padded, kernel, axis=axes)
    win = win[(Ellipsis,) + tuple(slice(None, None, s) for s in stride) + (slice(None),) * n]
    return win.reshape(win.shape[: a.ndim] + (-1,))


def pool_divisor(shape, n: int, kernel, stride, padding, include_pad: bool) -> np.ndarray:
    """avg_pool's divisor per output: the window size, or (count_include_pad=False) its elements inside."""
    if include_pad:
        return np.float64(math.prod(kernel))
    ones = np.ones(tuple(shape[-n:]))
    return pool_windows(ones, n, kernel, stride, padding, 0.0).sum(-1)


def nearest_index(in_size: int, out_size: int, scale) -> np.ndarray:
    """torch's nearest source index (upsample_nearest: floor(dst · scale) in float32, scale = 1/scale_factor
    when one is given, else in/out; clamped to the input)."""
    if out_size == in_size:
        return np.arange(out_size)
    s = np.float32(1.0 / scale) if scale is not None else np.float32(in_size) / np.float32(out_size)
    src = np.floor(np.arange(out_size, dtype=np.float32) * s).astype(np.int64)
    return np.minimum(src, in_size - 1)


def interpolate_apply(a: np.ndarray, options) -> np.ndarray:
    """Nearest interpolation of the dims after the first two (exact: a gather)."""
    out = interpolate_sizes(a.shape, options, _raise)
    scale = options["scale_factor"]
    n = a.ndim - 2
    scales = _spatial(scale, n, "scale_factor", _raise) if scale is not None else (None,) * n
    for k, (size, o, sc) in enumerate(zip(a.shape[2:], out, scales)):
        a = np.take(a, nearest_index(size, o, sc), axis=2 + k)
    return a


def _raise(what):
    raise ValueError(what)


# ------------------------------------------------------------------------------------ NumPy forms
def gelu(a, approximate="none"):
    if approximate == "tanh":
        return 0.5 * a * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a * a * a)))
    return 0.5 * a * (1.0 + _erf(np.asarray(a, dtype=np.float64) / math.sqrt(2.0)))


_ERF = np.frompyfunc(math.erf, 1, 1)


def _erf(t):
    """erf in float64, elementwise (math.erf: within an ULP of float64's; NumPy has none)."""
    return np.asarray(_ERF(t), dtype=np.float64)


def elu(a, alpha=1.0):
    return np.where(a > 0, a, alpha * np.expm1(np.minimum(a, 0.0)))


def hardswish(a):
    return a * np.clip(a + 3.0, 0.0, 6.0) / 6.0


def softmax(a, dim):
    e = np.exp(a - np.max(a, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


# ------------------------------------------------------------------------------------- bound rules
def _activation(value, slope, absolute):
    """An activation computed in float32 before its result rounds (bounds.by_slope with a constant slope):
    slope·e, plus C_FN·u32 relative to the result and C_FN·u32·absolute(a): the forms x·(1 + erf),
    x·relu6(x + 3), exp(x) − 1 cancel where the result is small, so there their float32 evaluation errs
    relative to |x| (or to 1), not to |f(x)|."""
    def bound(values, errs, options):
        (a,), (ea,) = values, errs
        return bounds.by_slope(lambda t: value(t, **options), lambda lo, hi: slope, absolute)(a, ea)
    return bound


def matmul_bound(values, errs, options):
    """A dot product of length K per output, accumulated in float32 (bounds.matmul)."""
    (a, b), (ea, eb) = values, errs
    return bounds.matmul(a, ea, b, eb)


def softmax_bound(values, errs, options):
    """y = exp(a − max)/Σ: ∂y_i = y_i(∂a_i − Σ y_j ∂a_j), so y_i(e_i + Σ y_j e_j); in float32 the shift
    a − max (u32·|a − max|), the exp (C_FN·u32), the sum of n positive terms (C_ACC·u32·√n) and the
    division (u32)."""
    (a,), (ea,) = values, errs
    dim = options["dim"]
    n = a.shape[dim] if a.ndim else 1
    y = softmax(a, dim)
    shift = a - np.max(a, axis=dim, keepdims=True)
    prop = y * (ea + np.sum(y * ea, axis=dim, keepdims=True))
    comp = y * bounds.U32 * (np.abs(shift) + bounds.C_FN + bounds.C_ACC * math.sqrt(n) + 1.0)
    return y, prop + comp


def cumsum_bound(values, errs, options):
    """A prefix sum of k terms accumulated in float32: Σe + C_ACC·u32·√k·Σ|a| over each prefix."""
    (a,), (ea,) = values, errs
    dim = options["dim"] % max(a.ndim, 1)
    if a.ndim == 0:
        return a, ea
    shape = [1] * a.ndim
    shape[dim] = a.shape[dim]
    k = np.arange(1, a.shape[dim] + 1, dtype=np.float64).reshape(shape)
    return (np.cumsum(a, axis=dim), np.cumsum(ea, axis=dim)
            + bounds.C_ACC * bounds.U32 * np.sqrt(k) * np.cumsum(np.abs(a), axis=dim))


def avg_pool_bound(n: int):
    def bound(values, errs, options):
        """A window's mean in float32: the mean of the errors plus C_ACC·u32·√k·Σ|a|/divisor."""
        (a,), (ea,) = values, errs
        kernel, stride, padding, _ = pool_geometry(a.shape, options, n, _raise)
        win = pool_windows(a, n, kernel, stride, padding, 0.0)
        div = pool_divisor(a.shape, n, kernel, stride, padding, options["count_include_pad"])
        werr = pool_windows(ea, n, kernel, stride, padding, 0.0).sum(-1)
        acc = bounds.C_ACC * bounds.U32 * math.sqrt(math.prod(kernel)) * np.abs(win).sum(-1)
        return win.sum(-1) / div, (werr + acc) / div
    return bound


def max_pool_bound(n: int):
    def bound(values, errs, options):
        """A window's maximum: exact, off by at most its elements' largest error."""
        (a,), (ea,) = values, errs
        kernel, stride, padding, _ = pool_geometry(a.shape, options, n, _raise)
        return (pool_windows(a, n, kernel, stride, padding, -np.inf).max(-1),
                pool_windows(ea, n, kernel, stride, padding, 0.0).max(-1))
    return bound


def interpolate_bound(values, errs, options):
    (a,), (ea,) = values, errs
    return interpolate_apply(a, options), interpolate_apply(ea, options)


def clamp_bound(values, errs, options):
    """clamp(min, max): 1-Lipschitz and exact; a bound is a Python number, off by its rounding to the dtype
    (counted by the caller through scalar_error)."""
    (a,), (ea,) = values, errs
    lo, hi = options["min"], options["max"]
    return np.clip(a, -np.inf if lo is None else lo, np.inf if hi is None else hi), ea


def ones_bound(values, errs, options):
    (a,), _ = values, errs
    return np.ones_like(a), np.zeros_like(a)


def _negative_part(a):
    return np.where(a < 0, np.abs(a), 0.0)


def gelu_bound():
    return _activation(gelu, GELU_SLOPE, _negative_part)


def elu_bound():
    return _activation(elu, 1.0, lambda a: np.where(a < 0, 1.0, 0.0))


def hardswish_bound():
    return _activation(lambda a: hardswish(a), HARDSWISH_SLOPE, _negative_part)


# ------------------------------------------------------------------------ repro stage code
# -- the repro stage table's NumPy text (FP64, no rounding) of the call ops whose text is computed; the others'
# are templates in the op table (ops.py, Op.text). The script imports numpy as np and torch (erf is torch's).
def gelu_text(names: list[str], shapes: list[tuple], options: dict) -> str:
    a = names[0]
    if options["approximate"] == "tanh":
        return f"0.5 * {a} * (1.0 + np.tanh({math.sqrt(2.0 / math.pi)!r} * ({a} + 0.044715 * {a} ** 3)))"
    return f"0.5 * {a} * (1.0 + torch.special.erf(torch.from_numpy({a} / np.sqrt(2.0))).numpy())"


def interpolate_text(names: list[str], shapes: list[tuple], options: dict) -> str:
    a, shape = names[0], tuple(shapes[0])
    out = interpolate_sizes(shape, options, _raise)
    n = len(shape) - 2
    scale = options["scale_factor"]
    scales = _spatial(scale, n, "scale_factor", _raise) if scale is not None else (None,) * n
    for k, (size, o, sc) in enumerate(zip(shape[2:], out, scales)):
        a = f"np.take({a}, {nearest_index(size, o, sc).tolist()}, axis={2 + k})"
    return a


def pool_text(kind: str, n: int):
    """The text of an n-d pool ("avg" or "max"): its windows (np.pad, sliding_window_view), their max or mean."""
    def text(names: list[str], shapes: list[tuple], options: dict) -> str:
        a, shape = names[0], tuple(shapes[0])
        kernel, stride, padding, out = pool_geometry(shape, options, n, _raise)
        axes = tuple(range(len(shape) - n, len(shape)))
        steps = ", ".join(["..."] + [f"::{s}" for s in stride] + [":"] * n)
        pad = [(0, 0)] * (len(shape) - n) + [(p, p) for p in padding]

        def windows(x, fill):
            return (f"np.lib.stride_tricks.sliding_window_view(np.pad({x}, {pad}, constant_values={fill}), "
                    f"{kernel}, axis={axes})[{steps}].reshape({tuple(shape[:-n]) + out + (-1,)})")
        if kind == "max":
            return f"{windows(a, '-np.inf')}.max(-1)"
        if options["count_include_pad"]:
            return f"{windows(a, 0.0)}.sum(-1) / {float(math.prod(kernel))!r}"
        return f"{windows(a, 0.0)}.sum(-1) / {windows(f'np.ones({shape})', 0.0)}.sum(-1)"
    return text
