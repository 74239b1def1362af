"""Score an output against the FP64 reference: metrics, tolerance, verdict.

The error model (constants justified in the README, "Tolerance"): for each
element i of a row with n elements,

    tol_i = C_OUT * ulp_r(max(|ref_i|, |w_i z_i|, |b_i|) * (1 + 2 u_r))
          + |w_i| * (kappa + |z_i|) * (C_ROUND * u_stat + C_ACC * u_acc * sqrt(n))

ulp_r is the spacing of the narrowest dtype the model deliberately rounds
through, u_stat the unit roundoff of the dtype the model deliberately computes
its statistics in, u_acc that of float32 (the accumulation a correct
implementation owes float16/bfloat16/float32 models), kappa the row's
rms(x)/sqrt(var+eps) (how much an error in the mean is amplified) and z the
normalized value (how much a relative error in 1/std is amplified).

A row is over the bound when some element's error exceeds tol_i. A compiled
path is `inaccurate` only on rows that are over the bound *and* whose error is
more than EAGER_MULTIPLIER times eager's on that row, both measured in units
of the bound (as torch._dynamo's fp64-reference check uses a multiplier); eager over the bound is an unstable pattern.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from harness.core.dtypes import cast, name_of, narrowest, ulp, unit_roundoff
from harness.oracle.reference import Reference

C_OUT = 2.0
# A program's running bound counts each of its roundings; two correct implementations may still
# differ in the last bit of the output (FMA, operation order): one ULP of the rounding dtype.
C_IMPL = 1.0
C_ROUND = 4.0
C_ACC = 2.0
EAGER_MULTIPLIER = 2.0


@dataclass(frozen=True)
class Score:
    verdict: str
    message: str
    max_abs_err: float | None
    max_rel_err: float | None
    max_ulp: float | None
    worst_row: int | None
    max_err_over_tol: float | None
    out_dtype: str
    expected_dtype: str
    unstable: bool = False
    rows_over: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def _num(v) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if np.isfinite(v) else None


def tolerance(ref: Reference, rounding_dtype: str | None = None) -> np.ndarray:
    """The per-element absolute error bound of the error model above."""
    r = rounding_dtype or ref.rounding_dtype
    if ref.bound is not None:  # a program: its running bound already holds every deliberate rounding
        return C_IMPL * ulp(np.abs(ref.out) * (1.0 + 2.0 * unit_roundoff(r)), r) + ref.bound
    scale = np.maximum(np.maximum(np.abs(ref.out), np.abs(ref.weight * ref.z)), np.abs(ref.bias))
    # the spacing just above `scale`: near a power of two, a correctly rounded
    # neighbour lives in the next binade, where one ULP is twice as wide
    out_term = C_OUT * ulp(scale * (1.0 + 2.0 * unit_roundoff(r)), r)
    u_eff = C_ROUND * unit_roundoff(ref.stat_dtype) + C_ACC * unit_roundoff("float32") * np.sqrt(ref.row_len)
    stat_term = np.abs(ref.weight) * (ref.kappa + np.abs(ref.z)) * u_eff
    return out_term + stat_term


def _errors(out: np.ndarray, ref: Reference) -> tuple[np.ndarray, np.ndarray]:
    """Absolute errors (inf where non-finite and wrong) and the bad-nonfinite mask."""
    y = np.asarray(out).astype(np.float64)
    ref_r = cast(ref.out, name_of(out.dtype)).astype(np.float64)
    both_same = (y == ref_r) & ~np.isfinite(y)  # overflow the reference also has
    bad_nonfinite = ~np.isfinite(y) & np.isfinite(ref_r)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(y - ref.out)
    err = np.where(both_same, 0.0, err)
    err = np.where(np.isnan(err), np.inf, err)
    return err, bad_nonfinite


def _row_max(values: np.ndarray, rows: np.ndarray, n_rows: int) -> np.ndarray:
    out = np.zeros(n_rows)
    np.maximum.at(out, rows.ravel(), values.ravel())
    return out


def score(out: np.ndarray, ref: Reference, eager_out: np.ndarray | None = None) -> Score:
    """The verdict of `out` against `ref`; `eager_out` is None when scoring eager itself."""
    out_dtype = name_of(out.dtype)
    expected = name_of(eager_out.dtype) if eager_out is not None else ref.out_dtype
    empty = dict(max_abs_err=None, max_rel_err=None, max_ulp=None, worst_row=None, max_err_over_tol=None)
    if tuple(out.shape) != tuple(ref.out.shape):
        return Score("shape_mismatch", f"output shape {list(out.shape)}, expected {list(ref.out.shape)}",
                     out_dtype=out_dtype, expected_dtype=expected, **empty)

    err, bad_nonfinite = _errors(out, ref)
    finite = np.isfinite(err)
    n_rows = int(ref.rows.max()) + 1 if ref.rows.size else 0
    rounding = narrowest(ref.rounding_dtype, out_dtype)
    tol = tolerance(ref, rounding)
    ratio = err / tol
    row_err = _row_max(err, ref.rows, n_rows)
    row_ratio = _row_max(ratio, ref.rows, n_rows)
    over = row_ratio > 1.0

    ferr = np.where(finite, err, 0.0)
    max_abs = float(ferr.max()) if ferr.size else 0.0
    tiny = float(ulp(np.array(0.0), out_dtype))  # the output dtype's spacing at 0
    rel = ferr / np.maximum(np.abs(ref.out), tiny)
    ulps = ferr / ulp(ref.out, out_dtype)
    worst = int(np.argmax(np.where(np.isfinite(row_ratio), row_ratio, np.finfo(float).max))) if n_rows else None
    metrics = dict(
        max_abs_err=_num(max_abs), max_rel_err=_num(rel.max() if rel.size else 0.0),
        max_ulp=_num(ulps.max() if ulps.size else 0.0), worst_row=worst,
        max_err_over_tol=_num(row_ratio.max() if n_rows else 0.0),
    )
    describe = (f"max abs err {max_abs:.4g} ({metrics['max_ulp'] or 0:.3g} ulp of {out_dtype}), "
                f"{metrics['max_err_over_tol'] or 0:.3g}x the bound at row {worst}")

    eager_bad = None
    eager_row_err = None
    eager_row_ratio = None
    if eager_out is not None and tuple(eager_out.shape) == tuple(ref.out.shape):
        eager_err, eager_bad = _errors(eager_out, ref)
        eager_row_err = _row_max(eager_err, ref.rows, n_rows)
        eager_row_ratio = _row_max(eager_err / tol, ref.rows, n_rows)

    if out_dtype != expected:
        who = "eager's" if eager_out is not None else "torch's type promotion"
        return Score("dtype_mismatch", f"output dtype {out_dtype}, {who} is {expected}; {describe}",
                     out_dtype=out_dtype, expected_dtype=expected, **metrics)

    if bad_nonfinite.any():
        blame = bad_nonfinite if eager_bad is None else bad_nonfinite & ~eager_bad
        if blame.any():
            where = np.argwhere(blame)[0].tolist()
            return Score("nonfinite", f"{int(blame.sum())} non-finite values where the reference is finite "
                         f"(first at {where})", out_dtype=out_dtype, expected_dtype=expected,
                         unstable=eager_out is None, **metrics)

    if eager_out is None:
        if over.any():
            return Score("inaccurate", f"unstable pattern: eager exceeds the bound on {int(over.sum())} of "
                         f"{n_rows} rows; {describe}", out_dtype=out_dtype, expected_dtype=expected,
                         unstable=True, rows_over=int(over.sum()), **metrics)
        return Score("pass", describe, out_dtype=out_dtype, expected_dtype=expected, **metrics)

    if eager_row_err is None:  # eager failed to give a comparable output: the bound alone decides
        worse = over
    else:
        # compare errors in units of the bound, element by element, so a large
        # error eager makes on a large value does not excuse a large error on a
        # small one in the same row
        worse = over & (row_ratio > EAGER_MULTIPLIER * eager_row_ratio)
    shared = int((over & ~worse).sum())
    if worse.any():
        worst_worse = int(np.argmax(np.where(worse, row_ratio, -1.0)))
        metrics["worst_row"] = worst_worse
        eager_note = "" if eager_row_err is None else (
            f" ({row_ratio[worst_worse]:.3g}x the bound), eager's {eager_row_err[worst_worse]:.3g} "
            f"({eager_row_ratio[worst_worse]:.3g}x)")
        return Score("inaccurate", f"{int(worse.sum())} of {n_rows} rows over the bound and worse than "
                     f"{EAGER_MULTIPLIER:g}x eager; row {worst_worse} err {row_err[worst_worse]:.4g}"
                     f"{eager_note}; {describe}", out_dtype=out_dtype, expected_dtype=expected,
                     rows_over=int(worse.sum()), **metrics)
    note = (f"; {shared} rows over the bound but within {EAGER_MULTIPLIER:g}x of eager's error there "
            "(eager is near or over the bound too: an unstable pattern)") if shared else ""
    return Score("pass", describe + note, out_dtype=out_dtype, expected_dtype=expected,
                 rows_over=0, **metrics)


def eager_row_errors(eager_out: np.ndarray, ref: Reference) -> float | None:
    """eager's max abs error over the finite elements (for the record)."""
    if tuple(eager_out.shape) != tuple(ref.out.shape):
        return None
    err, _ = _errors(eager_out, ref)
    finite = err[np.isfinite(err)]
    return _num(finite.max()) if finite.size else None
