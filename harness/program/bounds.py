"""Running error analysis for one op: (FP64 value, error bound) from its operands'.

Every function takes operand values (float64 arrays, exact math, no
intermediate rounding) and their error bounds `e` (how far a correct
implementation's operand may be from the value) and returns the result's
value and the bound propagated through the op, *before* the rounding of the
result into its dtype (`rounding`, added by the caller).

Propagation is first order, |∂f/∂a|·e_a + |∂f/∂b|·e_b, with the derivative
taken at the worst point of [a − e_a, a + e_a] where it blows up (division,
rsqrt, sqrt, reciprocal, negative powers): those bounds are then exact, and
infinite where the interval reaches 0, instead of silently too small.

Constants (one place; compare.py's C_ACC and C_ROUND have the same values,
tests/program/test_interpret.py checks it; imported from there they would pull
the case spec into this self-contained package):

ROUND = 1.0    each rounding of a result into its dtype costs ROUND·u·|z|
               (u = unit_roundoff: the ULP of 1.0). Round to nearest errs by at
               most 0.5·ULP ≤ 0.5·u·|z|; one full u leaves room for last-bit
               differences between two correct implementations (an FMA, a
               division done as a·(1/b), rsqrt as 1/sqrt: two roundings, an
               approximate rsqrt within 1 ULP, a float32 op before a float16
               rounding). Below the normal range the spacing is absolute:
               max(u·|z|, smallest subnormal).
C_ACC = 2.0    a float32 sum of n terms (torch on CPU accumulates float16,
               bfloat16 and float32 reductions in float32) errs by about
               √n·u32·Σ|a| when its rounding errors are random, whether
               sequential, blocked or pairwise; 2 is two standard deviations of
               that walk, so sequential summation is entitled to pass.
C_ROUND = 4.0  the roundings of an F.* norm's statistics chain (mean,
               variance, rsqrt, the scale), relative, in u_stat = u32: the CPU
               kernels keep their statistics in float32.
C_FN = 2.0     a transcendental op (silu, sigmoid) computed in float32 before
               its result is rounded: an exp within 1 ULP (the vectorised
               kernels' Sleef exp is) and the 1 + e^-x it feeds, relative in
               u32; the division's own rounding is the result's, counted by
               ROUND. float16/bfloat16 ops compute in float32 on CPU too.
"""
from __future__ import annotations

import math

import numpy as np

from harness.core.dtypes import cast, ulp, unit_roundoff

ROUND = 1.0
C_ACC = 2.0
C_ROUND = 4.0
C_FN = 2.0
U32 = unit_roundoff("float32")


def _times(deriv, e):
    """|deriv|·e, 0 where e is 0 (no inf·0 = nan where the value is exact)."""
    e = np.asarray(e, dtype=np.float64)
    return np.where(e == 0, 0.0, np.abs(deriv) * e)


def rounding(z, dtype: str):
    """The bound on rounding value z into `dtype` (0 in float64)."""
    if dtype == "float64":
        return np.zeros_like(np.asarray(z, dtype=np.float64))
    tiny = float(ulp(np.float64(0.0), dtype))
    return ROUND * np.maximum(unit_roundoff(dtype) * np.abs(z), tiny)


def scalar_error(c: float, dtype: str) -> float:
    """How far a Python number used by a `dtype` op may be from c: its rounding into dtype.

    torch keeps a float16/bfloat16 op's scalar in float32; a compiler may round
    it to the tensor's dtype. The float16/bfloat16 grids lie in float32's, so
    the dtype's rounding bounds both (float32's where the dtype overflows).
    """
    if dtype == "float64":
        return 0.0
    with np.errstate(over="ignore"):
        err = abs(float(c) - float(cast(np.float64(c), dtype)))
        if not math.isfinite(err):
            err = abs(float(c) - float(cast(np.float64(c), "float32")))
    return err


# ------------------------------------------------------------- elementwise
def add(a, ea, b, eb, sign=1.0):
    return a + sign * b, ea + eb


def mul(a, ea, b, eb):
    return a * b, _times(b, ea) + _times(a, eb) + ea * eb


def div(a, ea, b, eb):
    z = a / b
    lo = np.abs(b) - eb
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where(lo > 0, (ea + _times(z, eb)) / np.where(lo > 0, lo, 1.0), np.inf)
    return z, np.where((ea == 0) & (eb == 0), 0.0, e)


def power(a, ea, k, ek, scalar_exponent: bool):
    """a ** k for a tensor a; k a Python number (scalar_exponent) or a tensor."""
    z = np.power(a, k)
    absa = np.abs(a)
    if scalar_exponent and k == 0:
        e = np.zeros_like(z)
    elif scalar_exponent and k == 1:
        e = np.broadcast_to(ea, z.shape) + 0.0
    elif scalar_exponent and k == 2:
        e = (2.0 * absa + ea) * ea
    elif scalar_exponent and k > 1:  # |d/dt t^k| grows with |t|: worst at |a| + e
        e = _times(k * np.power(absa + ea, k - 1), ea)
    elif scalar_exponent:  # k < 1: worst at |a| − e; for 0 < k < 1 also |s^k − t^k| ≤ |s − t|^k
        lo = absa - ea
        safe = np.where(lo > 0, lo, 1.0)
        e = np.where(lo > 0, _times(k * np.power(safe, k - 1), ea), np.inf)
        if k > 0:
            e = np.minimum(e, np.power(ea, k))
        e = np.where(ea == 0, 0.0, e)
    else:  # tensor exponent: first order at the value
        e = _times(k * np.power(absa, np.asarray(k) - 1), ea)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = e + _times(z * np.log(absa), ek)
    return z, e


def rpower(c: float, ec: float, b, eb):
    """c ** b for a Python number c and a tensor b."""
    z = np.power(float(c), b)
    with np.errstate(divide="ignore", invalid="ignore"):
        worst = np.maximum(np.power(float(c), b - eb), np.power(float(c), b + eb))
        e = _times(math.log(abs(c)) * worst if c != 0 else np.inf, eb) + _times(b * np.power(float(c), b - 1), ec)
    return z, e


def rsqrt(a, ea):
    z = 1.0 / np.sqrt(a)
    lo = a - ea
    safe = np.where(lo > 0, lo, 1.0)
    e = np.where(lo > 0, 0.5 * ea / (safe * np.sqrt(safe)), np.inf)
    return z, np.where(ea == 0, 0.0, e)


def sqrt(a, ea):
    z = np.sqrt(a)
    lo = a - ea
    safe = np.where(lo > 0, lo, 1.0)
    e = np.minimum(np.where(lo > 0, 0.5 * ea / np.sqrt(safe), np.inf), np.sqrt(ea))
    return z, np.where(ea == 0, 0.0, e)


def reciprocal(a, ea):
    z = 1.0 / a
    lo = np.abs(a) - ea
    safe = np.where(lo > 0, lo, 1.0)
    e = np.where(lo > 0, ea / (np.abs(a) * safe), np.inf)
    return z, np.where(ea == 0, 0.0, e)


def by_slope(value, slope, absolute=None):
    """The bound rule of an elementwise op f from its slope: (a, ea) -> (f(a), max|f'| on [a-ea, a+ea]·ea + C_FN·u32·|f(a)|).

    `slope(lo, hi)` is max |f'(t)| over [lo, hi] (elementwise arrays). The
    C_FN term is the op's own float32 evaluation before its result rounds;
    `absolute(a)` adds to its |f(a)| where that evaluation errs relative to
    something else (harness.program.calls' activations: x·(1 + erf) cancels
    where the result is small, so it errs relative to |x|, not |f(x)|).
    """
    def bound(a, ea):
        z = value(a)
        scale = np.abs(z) if absolute is None else np.abs(z) + absolute(a)
        return z, _times(slope(a - ea, a + ea), ea) + C_FN * U32 * scale
    return bound


def matmul(a, ea, b, eb):
    """a @ b (np.matmul's broadcasting): each output a dot product of length K = a.shape[-1] accumulated in
    float32, as `reduction`'s sum of products. The products' errors propagate as |b|·e_a + |a|·e_b (+ e_a·e_b),
    the sum as C_ACC·u32·√K·Σ|a_i b_i|."""
    k = a.shape[-1]
    z = np.matmul(a, b)
    prop = np.matmul(ea, np.abs(b)) + np.matmul(np.abs(a), eb) + np.matmul(ea, eb)
    return z, prop + C_ACC * U32 * math.sqrt(k) * np.matmul(np.abs(a), np.abs(b))


def linear(a, ea, w, ew, b=None, eb=None):
    """x @ W.T (+ b) over the last dim of x: `matmul` with W.T (n, the input features, is K); the bias's error
    adds."""
    z, e = matmul(a, ea, w.T, ew.T)
    if b is not None:
        z, e = z + b, e + (0.0 if eb is None else eb)
    return z, e


def square(a, ea):
    return a * a, (2.0 * np.abs(a) + ea) * ea


# -------------------------------------------------------------- reductions
def reduction(op: str, a, ea, axes: tuple[int, ...], correction):
    """sum / mean / var over `axes` (keepdims), accumulated in float32 by a correct implementation.

    sum: Σe + C_ACC·u32·√n·Σ|a|; mean: that / n (the division by n is exact
    in the analysis; its rounding is the result's). var(correction=c) =
    Σ(a − m)²/(n − c): ∂/∂a_i = 2(a_i − m)/(n − c) (the mean's own dependence
    cancels), the input term kept to second order, Σ(e_i + ē)²/(n − c), and a
    two-pass accumulation: C_ACC·u32·√n on Σ(a − m)² plus n·δ²/(n − c) for a
    mean off by its own accumulation bound δ.
    """
    n = math.prod(a.shape[i] for i in axes) if axes else 1
    acc = C_ACC * U32 * math.sqrt(n)
    s_abs = np.sum(np.abs(a), axis=axes, keepdims=True)
    s_err = np.sum(ea, axis=axes, keepdims=True)
    if op == "sum":
        return np.sum(a, axis=axes, keepdims=True), s_err + acc * s_abs
    if op == "mean":
        return np.sum(a, axis=axes, keepdims=True) / n, (s_err + acc * s_abs) / n
    dof = n - (1 if correction is None else correction)
    m = np.sum(a, axis=axes, keepdims=True) / n
    dev = a - m
    ss = np.sum(dev * dev, axis=axes, keepdims=True)
    e_bar = s_err / n
    first = np.sum(2.0 * np.abs(dev) * ea, axis=axes, keepdims=True)
    second = np.sum((ea + e_bar) ** 2, axis=axes, keepdims=True)
    delta = acc * s_abs / n
    return ss / dof, (first + second + acc * ss + n * delta * delta) / dof


def centered_moment(op: str, t, et, em, axes: tuple[int, ...], dtype: str):
    """The bound of a centred second moment a program writes out, Σ(T − M)² (`sum`) or its mean (`mean`) over
    `axes`, M the keepdim mean of T over them (harness.program.statistics finds it), from T's bound `et` and
    M's as computed `em` (accumulation, input errors and rounding), the deviations and squares in `dtype`.

    Interval arithmetic through d = T − M, d², Σ carries M's error into every d_i as if independent,
    2·Σ|d_i|·e_M; but the first-order term of M's error is −2·δ·Σd_i = 0 (Σd_i = 0 for the exact mean), so
    only its square stays: with d̂_i = d_i + ε_i − δ (|ε_i| ≤ e_T,i, |δ| ≤ e_M),
    Σd̂² − Σd² = 2Σd_i·ε_i + Σ(ε_i − δ)² ≤ Σ2|d_i|·e_T,i + Σ(e_T,i + e_M)²,
    plus the roundings of d̂ and d̂² (u·|d̂| each, 3u·d̂² in all) and the float32 sum (C_ACC·u32·√n·Σd̂²),
    |d̂_i| ≤ |d_i| + e_T,i + e_M. Relative to Σd², M's part is (e_M/σ)² ≈ (C_ACC·u32·√n·κ)² for κ = |M|/σ,
    finite and small while C_ACC·u32·√n·κ < 1, where the interval's 2e_M/σ ≈ 2·C_ACC·u32·√n·κ reaches 1 first
    (docs/tolerance.md, "A floor for infinite running bounds")."""
    n = math.prod(t.shape[i] for i in axes) if axes else 1
    dev = t - np.sum(t, axis=axes, keepdims=True) / n
    reach = np.abs(dev) + et + em
    e = (np.sum(2.0 * np.abs(dev) * et, axis=axes, keepdims=True) + np.sum((et + em) ** 2, axis=axes, keepdims=True)
         + (C_ACC * U32 * math.sqrt(n) + 3.0 * unit_roundoff(dtype)) * np.sum(reach * reach, axis=axes, keepdims=True))
    return e / n if op == "mean" else e


def normalize(kind: str, a, ea, axes: tuple[int, ...], eps):
    """The statistics part of an F.* norm over `axes` (keepdims): ẑ and its bound before the affine.

    ẑ = (a − m)/σ (m = 0 for rms_norm), σ = √(var + eps). Returns ẑ and its
    error: with κ = rms(a)/σ, the closed form of the error model (docs/tolerance.md),
    (κ + |ẑ|)·(C_ROUND·u32 + C_ACC·u32·√n) for the float32 statistics, plus
    the input's error carried through ∂ẑ/∂a exactly to first order:
    (e_i + mean(e))/σ + |ẑ_i|·mean(|ẑ|·e)/σ (the mean term absent for rms_norm;
    |δσ|/σ ≤ mean(|a − m|·e)/σ² since the mean's dependence cancels).
    """
    n = math.prod(a.shape[i] for i in axes)
    ms = np.mean(a * a, axis=axes, keepdims=True)
    if kind == "rms_norm":
        m, var, e_mean = 0.0, ms, 0.0
    else:
        m = np.mean(a, axis=axes, keepdims=True)
        var = np.mean((a - m) ** 2, axis=axes, keepdims=True)
        e_mean = np.mean(ea, axis=axes, keepdims=True)
    sigma = np.sqrt(var + eps)
    z = (a - m) / sigma
    kappa = np.sqrt(ms) / sigma
    stats = (kappa + np.abs(z)) * (C_ROUND * U32 + C_ACC * U32 * math.sqrt(n))
    mz = np.mean(np.abs(z) * ea, axis=axes, keepdims=True)
    prop = (ea + e_mean) / sigma + np.abs(z) * mz / sigma
    return z, stats + prop
