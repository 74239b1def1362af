"""Score an output against the FP64 reference: metrics, tolerance, verdict.

The error model (constants justified in docs/tolerance.md): for each
element i of a row with n elements,

    tol_i = C_OUT * ulp_r(max(|ref_i|, |w_i z_i|, |b_i|) * (1 + 2 u_r))
          + |w_i| * (kappa + |z_i|) * (C_ROUND * u_stat + C_ACC * u_acc * sqrt(n))

ulp_r is the spacing of the narrowest dtype the model deliberately rounds
through, u_stat the unit roundoff of the dtype the model deliberately computes
its statistics in, u_acc that of float32 (the accumulation a correct
implementation owes float16/bfloat16/float32 models), kappa the row's
rms(x)/sqrt(var+eps) (how much an error in the mean is amplified) and z the
normalized value (how much a relative error in 1/std is amplified).

A row is over the bound when some element's error exceeds tol_i; eager over
the bound is an unstable pattern.

A compiled path is held to what correct implementations achieve on the row
(docs/tolerance.md, "What a correct float32 implementation achieves"). Its error beyond
the per-element terms (C_OUT and C_ROUND above), in units of |w|(kappa + |z|),
is its accumulation error; the row is `inaccurate` when that is more than
EAGER_MULTIPLIER times the largest of eager's and the float32 witnesses'
(harness.oracle.witness_error: sequential two-pass, sequential Welford, pairwise
two-pass, measured on the row itself) and more than FLOOR times the bound's
accumulation term C_ACC·√n·u_acc (one standard deviation of a sequential
sum's random walk: below it no measured error tells a bug from another
summation order). A program (or a module case's lifted program) is held the
same way to its own witnesses (harness.program.witness_run: the program run in
its dtypes with float32 sums sequential, pairwise and blocked, two-pass and
Welford), with the bound as the unit: a row is `inaccurate` when its error
beyond C_OUT ULPs (C_CAST for an output computed in float32 and rounded once
into a narrower dtype: a gradient's), per unit of the running bound, is more than
EAGER_MULTIPLIER times the largest of eager's and the witnesses' and more
than FLOOR (the bound is a sum of rounding and accumulation terms; FLOOR of
it is at most one standard deviation of each); on a row where the bound is
infinite somewhere, in absolute error with no floor (docs/tolerance.md, "Programs
against their witnesses"). Where no witness
applies (batch_norm eval; a program the witnesses cannot run), a row is
`inaccurate` when it is over the bound and its error, in units of the bound,
is more than EAGER_MULTIPLIER times eager's (as torch._dynamo's fp64-reference
check uses a multiplier).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass

import numpy as np

from harness.core.dtypes import cast, name_of, narrowest, ulp, unit_roundoff
from harness.core.verdicts import Verdict
from harness.oracle import witness_error
from harness.oracle.reference import Reference

C_OUT = 2.0
# An output computed in float32 and rounded once into a narrower dtype (Reference.rounded_once: a gradient's
# float32 backward and its one cast): every correct implementation's float32 value is within the running
# bound's float32 part of the exact one, and the cast rounds it correctly (IEEE conversion, round to nearest),
# so beyond that part it errs by half an ULP at most. C_OUT's other 1.5 ULP (a deliberate rounding on the way,
# last-bit differences of FMA or operation order) are float32 roundings here, already in the bound.
C_CAST = 0.5
# A program's running bound counts each of its roundings; two correct implementations may still
# differ in the last bit of the output (FMA, operation order): one ULP of the rounding dtype.
C_IMPL = 1.0
C_ROUND = 4.0
C_ACC = 2.0
EAGER_MULTIPLIER = 2.0
# The standard deviation of a sequential sum's relative rounding error: n roundings, each uniform in
# ±(u/2)·|partial sum| (u = unit_roundoff, the spacing at 1), partial sums growing linearly, give
# (u/2)·√(n/3)·(1/√3) = u·√n/6; as a share of the accumulation term C_ACC·√n·u that is 1/(6·C_ACC).
FLOOR = 1.0 / (6.0 * C_ACC)


@dataclass(frozen=True)
class Score:
    verdict: Verdict
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
    name: str | None = None  # the output's name when the case has several (Reference.output_names)

    def to_dict(self) -> dict:
        return asdict(self)


def as_outputs(out) -> tuple:
    """A run's outputs as a tuple: `out` is one array, or a tuple of them for a case of several outputs."""
    return out if isinstance(out, tuple) else (out,)


def _num(v) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if np.isfinite(v) else None


def _terms(ref: Reference, r: str) -> tuple[np.ndarray, np.ndarray, float]:
    """(per-element terms, the unit |w|(kappa + |z|), the accumulation term per unit) of the bound."""
    scale = np.maximum(np.maximum(np.abs(ref.out), np.abs(ref.weight * ref.z)), np.abs(ref.bias))
    # the spacing just above `scale`: near a power of two, a correctly rounded
    # neighbour lives in the next binade, where one ULP is twice as wide
    out_term = C_OUT * ulp(scale * (1.0 + 2.0 * unit_roundoff(r)), r)
    unit = np.abs(ref.weight) * (ref.kappa + np.abs(ref.z))
    per_element = out_term + unit * C_ROUND * unit_roundoff(ref.stat_dtype)
    return per_element, unit, C_ACC * unit_roundoff("float32") * float(np.sqrt(ref.row_len))


def tolerance(ref: Reference, rounding_dtype: str | None = None) -> np.ndarray:
    """The per-element absolute error bound of the error model above."""
    r = rounding_dtype or ref.rounding_dtype
    if ref.bound is not None:  # a program: its running bound already holds every deliberate rounding
        return C_IMPL * ulp(np.abs(ref.out) * (1.0 + 2.0 * unit_roundoff(r)), r) + ref.bound
    per_element, unit, acc = _terms(ref, r)
    return per_element + unit * acc


_WITNESS_UNITS: OrderedDict = OrderedDict()  # id(ref) -> (ref, units) of the last WITNESS_MEMO references
WITNESS_MEMO = 64


def witness_units(ref: Reference) -> np.ndarray:
    """Per row, the float32 witnesses' accumulation error per unit of kappa + |z| (harness.oracle.witness_error);
    measured once per reference in a process (a worker scores one case's reference for each of its paths)."""
    kept = _WITNESS_UNITS.get(id(ref))
    if kept is not None and kept[0] is ref:
        _WITNESS_UNITS.move_to_end(id(ref))
        return kept[1]
    shape = ref.stats_rows.shape
    units = witness_error.accumulation_units(ref.stats_rows, ref.z.reshape(shape), ref.kappa.reshape(shape),
                                       ref.centered, ref.eps)
    units.setflags(write=False)
    _WITNESS_UNITS[id(ref)] = (ref, units)
    while len(_WITNESS_UNITS) > WITNESS_MEMO:
        _WITNESS_UNITS.popitem(last=False)
    return units


def witness_allowance(ref: Reference, rounding_dtype: str | None = None) -> np.ndarray | None:
    """Per row, the error beyond the per-element terms a compiled path is allowed before eager's share, in the
    measured rule's unit (|w|(kappa+|z|) for a catalog norm, the running bound for a program):
    EAGER_MULTIPLIER x the witnesses' there, at least the floor; None where no witness applies (batch_norm
    eval, a program no witness can run: the bound decides)."""
    found = _allowance(ref, rounding_dtype or ref.rounding_dtype)
    return None if found is None else found[2]


def measured_tolerance(ref: Reference, rounding_dtype: str | None = None) -> np.ndarray | None:
    """Per element, what a compiled path is held to before eager's share: the per-element terms plus
    witness_allowance on the row; None where no witness applies."""
    found = _allowance(ref, rounding_dtype or ref.rounding_dtype)
    if found is None:
        return None
    per_element, unit, allowed = found
    return per_element + unit * allowed[ref.rows]


def _allowance(ref: Reference, r: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(the per-element term, the unit per element, witness_allowance per row), each term computed once."""
    if ref.stats_rows is None:
        if ref.bound is None or ref.witness_outputs is None or not ref.witness_outputs():
            return None
        n_rows = int(ref.rows.max()) + 1 if ref.rows.size else 0
        terms = _program_terms(ref, r, n_rows)
        allowed = np.maximum(EAGER_MULTIPLIER * _program_witness_units(ref, terms, n_rows),
                             np.where(terms.unbounded, 0.0, FLOOR))
        return terms.per_element, terms.unit, allowed
    per_element, unit, acc = _terms(ref, r)
    return per_element, unit, np.maximum(EAGER_MULTIPLIER * witness_units(ref), FLOOR * acc)


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


# A non-finite output or an infinite bound is scored on purpose (NaN has no bound, inf/inf is NaN, a row's
# infinite bound times a multiplier stays infinite): numpy's warnings about it say nothing a verdict does not.
@np.errstate(invalid="ignore", over="ignore", divide="ignore")
def score(out: np.ndarray, ref: Reference, eager_out: np.ndarray | None = None) -> Score:
    """The verdict of `out` against `ref`; `eager_out` is None when scoring eager itself. A gradient
    (`ref.gradient`) is judged alone: eager's output is not read, and eager itself is judged as any path is."""
    alone = ref.gradient
    if alone:
        eager_out = None
    out_dtype = name_of(out.dtype)
    expected = name_of(eager_out.dtype) if eager_out is not None else ref.out_dtype
    empty = dict(max_abs_err=None, max_rel_err=None, max_ulp=None, worst_row=None, max_err_over_tol=None)
    if tuple(out.shape) != tuple(ref.out.shape):
        return Score(Verdict.SHAPE_MISMATCH, f"output shape {list(out.shape)}, expected {list(ref.out.shape)}",
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
    eager_err = None
    eager_row_err = None
    eager_row_ratio = None
    if eager_out is not None and tuple(eager_out.shape) == tuple(ref.out.shape):
        eager_err, eager_bad = _errors(eager_out, ref)
        eager_row_err = _row_max(eager_err, ref.rows, n_rows)
        eager_row_ratio = _row_max(eager_err / tol, ref.rows, n_rows)

    if out_dtype != expected:
        who = "eager's" if eager_out is not None else "torch's type promotion"
        return Score(Verdict.DTYPE_MISMATCH, f"output dtype {out_dtype}, {who} is {expected}; {describe}",
                     out_dtype=out_dtype, expected_dtype=expected, **metrics)

    if bad_nonfinite.any():
        blame = bad_nonfinite if eager_bad is None else bad_nonfinite & ~eager_bad
        if blame.any():
            where = np.argwhere(blame)[0].tolist()
            return Score(Verdict.NONFINITE, f"{int(blame.sum())} non-finite values where the reference is finite "
                         f"(first at {where})", out_dtype=out_dtype, expected_dtype=expected,
                         unstable=eager_out is None and not alone, **metrics)

    if eager_out is None and not alone:
        if over.any():
            return Score(Verdict.INACCURATE, f"unstable pattern: eager exceeds the bound on {int(over.sum())} of "
                         f"{n_rows} rows; {describe}", out_dtype=out_dtype, expected_dtype=expected,
                         unstable=True, rows_over=int(over.sum()), **metrics)
        return Score(Verdict.PASS, describe, out_dtype=out_dtype, expected_dtype=expected, **metrics)

    blamed = None
    if ref.stats_rows is not None:
        blamed = _measured(err, eager_err if eager_row_err is not None else None, ref, rounding, n_rows)
    elif ref.bound is not None and ref.witness_outputs is not None:
        blamed = _program_measured(err, eager_err if eager_row_err is not None else None, ref, rounding, n_rows)
    if blamed is not None:
        worse = blamed.worse
    else:
        if eager_row_err is None:  # eager failed to give a comparable output: the bound alone decides
            worse = over
        else:
            # compare errors in units of the bound, element by element, so a large
            # error eager makes on a large value does not excuse a large error on a
            # small one in the same row
            worse = over & (row_ratio > EAGER_MULTIPLIER * eager_row_ratio)
    shared = int((over & ~worse).sum())
    if worse.any():
        w = int(np.argmax(np.where(worse, row_ratio, -1.0)))
        metrics["worst_row"] = w
        if blamed is not None:
            unit, floor = blamed.at(w)
            eager_share = "" if alone else f"eager's {blamed.eager[w]:.3g}, "
            text = (f"{int(worse.sum())} of {n_rows} rows beyond what correct float32 implementations achieve; "
                    f"row {w} err {row_err[w]:.4g} ({row_ratio[w]:.3g}x the bound): {blamed.what} "
                    f"{blamed.own[w]:.3g} per unit of {unit}, over {EAGER_MULTIPLIER:g}x {eager_share}"
                    f"the float32 witnesses' {blamed.witness[w]:.3g} and the floor {floor:.3g}")
        else:
            eager_note = "" if eager_row_err is None else (
                f" ({row_ratio[w]:.3g}x the bound), eager's {eager_row_err[w]:.3g} ({eager_row_ratio[w]:.3g}x)")
            text = (f"{int(worse.sum())} of {n_rows} rows over the bound" + ("" if alone else
                    f" and worse than {EAGER_MULTIPLIER:g}x eager") + f"; row {w} err {row_err[w]:.4g}{eager_note}")
        return Score(Verdict.INACCURATE, f"{text}; {describe}", out_dtype=out_dtype, expected_dtype=expected,
                     rows_over=int(worse.sum()), **metrics)
    who = "a correct float32 implementation" if alone else "eager or a correct float32 implementation"
    note = (f"; {shared} rows over the bound but within {EAGER_MULTIPLIER:g}x of what {who} "
            "achieves there (an unstable pattern, or rounding errors that add up coherently)"
            ) if shared else ""
    return Score(Verdict.PASS, describe + note, out_dtype=out_dtype, expected_dtype=expected,
                 rows_over=0, **metrics)


@dataclass(frozen=True)
class _Blame:
    """Per row, accumulation errors in units of |w|(kappa + |z|): the output's, eager's, the witnesses'."""

    own: np.ndarray
    eager: np.ndarray
    witness: np.ndarray
    floor: float | np.ndarray  # a float, or per row
    worse: np.ndarray
    what: str = "accumulation error"
    unit: str | tuple[str, ...] = "|w|(kappa+|z|)"  # the unit, or per row

    def at(self, row: int) -> tuple[str, float]:
        """(unit, floor) of one row."""
        unit = self.unit if isinstance(self.unit, str) else self.unit[row]
        return unit, float(np.asarray(self.floor).reshape(-1)[row] if np.ndim(self.floor) else self.floor)


def _accumulation(err: np.ndarray, per_element: np.ndarray, unit: np.ndarray, ref: Reference,
                  n_rows: int) -> np.ndarray:
    """Per row, the largest error beyond the per-element terms, per unit of |w|(kappa + |z|)."""
    excess = np.maximum(err - per_element, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        units = np.where(excess > 0, excess / unit, 0.0)
    return _row_max(np.nan_to_num(units, nan=np.inf), ref.rows, n_rows)


def _measured(err, eager_err, ref: Reference, rounding: str, n_rows: int) -> _Blame:
    """Which rows' accumulation error is beyond EAGER_MULTIPLIER x what eager and the witnesses achieve."""
    per_element, unit, acc = _terms(ref, rounding)
    own = _accumulation(err, per_element, unit, ref, n_rows)
    eager = np.zeros(n_rows) if eager_err is None else _accumulation(eager_err, per_element, unit, ref, n_rows)
    floor = FLOOR * acc
    allowed = np.maximum(EAGER_MULTIPLIER * eager, floor)
    witnessed = np.zeros(n_rows)
    if (own > allowed).any():  # the witnesses cost a loop over the row: only when they can decide
        witnessed = witness_units(ref)
        allowed = np.maximum(allowed, EAGER_MULTIPLIER * witnessed)
    return _Blame(own, eager, witnessed, floor, own > allowed)


@dataclass(frozen=True)
class _ProgramTerms:
    """A program's per-element term (C_OUT ULPs of the rounding dtype) and its unit per element: the
    running bound, or 1 (absolute error, and no floor) on rows where the bound is infinite somewhere."""

    per_element: np.ndarray
    unit: np.ndarray
    unbounded: np.ndarray  # per row


def out_ulps(ref: Reference) -> float:
    """The ULPs of the output's rounding dtype a program's measured rule grants before the bound's unit:
    C_CAST for an output rounded once from float32 (Reference.rounded_once), else C_OUT."""
    return C_CAST if ref.rounded_once else C_OUT


def _program_terms(ref: Reference, r: str, n_rows: int) -> _ProgramTerms:
    per_element = out_ulps(ref) * ulp(np.abs(ref.out) * (1.0 + 2.0 * unit_roundoff(r)), r)
    unbounded = _row_max((~np.isfinite(ref.bound)).astype(float), ref.rows, n_rows) > 0
    return _ProgramTerms(per_element, np.where(unbounded[ref.rows], 1.0, ref.bound), unbounded)


def program_unit(ref: Reference, rounding_dtype: str | None = None) -> np.ndarray:
    """Per element, a program's unit in the measured rule: its running bound, or 1 on a row where the bound
    is infinite somewhere (the short script of a report restates the rule: harness.repro.check_code)."""
    n_rows = int(ref.rows.max()) + 1 if ref.rows.size else 0
    return _program_terms(ref, rounding_dtype or ref.rounding_dtype, n_rows).unit


def _program_witness_units(ref: Reference, terms: _ProgramTerms, n_rows: int) -> np.ndarray:
    """Per row, the largest error beyond the per-element term, per unit, of the program's witnesses."""
    worst = np.zeros(n_rows)
    for out in ref.witness_outputs():
        if tuple(out.shape) == tuple(ref.out.shape):
            errors = _errors(out, ref)[0]
            worst = np.maximum(worst, _accumulation(errors, terms.per_element, terms.unit, ref, n_rows))
    return worst


def _program_measured(err, eager_err, ref: Reference, rounding: str, n_rows: int) -> _Blame | None:
    """As _measured for a program: errors beyond C_OUT ULPs in units of its running bound, against eager's,
    its witnesses' and FLOOR; None where rows need the witnesses and none can run the program."""
    terms = _program_terms(ref, rounding, n_rows)
    floor = np.where(terms.unbounded, 0.0, FLOOR)
    own = _accumulation(err, terms.per_element, terms.unit, ref, n_rows)
    eager = np.zeros(n_rows) if eager_err is None else _accumulation(eager_err, terms.per_element, terms.unit,
                                                                   ref, n_rows)
    allowed = np.maximum(EAGER_MULTIPLIER * eager, floor)
    witnessed = np.zeros(n_rows)
    if (own > allowed).any():  # the witnesses walk the program once each: only when they can decide
        if not ref.witness_outputs():
            return None
        witnessed = _program_witness_units(ref, terms, n_rows)
        allowed = np.maximum(allowed, EAGER_MULTIPLIER * witnessed)
    units = tuple("absolute error (the bound is infinite on this row)" if u else "the bound" for u in terms.unbounded)
    return _Blame(own, eager, witnessed, floor, own > allowed, f"error beyond {out_ulps(ref):g} ulp of {rounding}",
                  units)


def measured_rows(out: np.ndarray, ref: Reference, eager_out: np.ndarray | None) -> tuple | None:
    """Per row, (the output's, eager's, the witnesses' error in the rule's units, the floor's scale) for a
    compiled path's output the measured rule judges: a row is `inaccurate` when its error is more than
    EAGER_MULTIPLIER x eager's and the witnesses' and more than FLOOR x the scale. None where the rule
    does not apply (batch_norm eval, a program no witness can run, an output of another shape or dtype).
    For the benchmark's sensitivity to the constants (harness.benchmark.sensitivity)."""
    if tuple(out.shape) != tuple(ref.out.shape) or (eager_out is not None and eager_out.shape != out.shape):
        return None
    n_rows = int(ref.rows.max()) + 1 if ref.rows.size else 0
    rounding = narrowest(ref.rounding_dtype, name_of(out.dtype))
    err = _errors(out, ref)[0]
    eager_err = None if eager_out is None else _errors(eager_out, ref)[0]
    if ref.stats_rows is not None:
        per_element, unit, acc = _terms(ref, rounding)
        scale, witnessed = np.full(n_rows, acc), witness_units(ref)
    elif ref.bound is not None and ref.witness_outputs is not None and ref.witness_outputs():
        terms = _program_terms(ref, rounding, n_rows)
        per_element, unit, scale = terms.per_element, terms.unit, np.where(terms.unbounded, 0.0, 1.0)
        witnessed = _program_witness_units(ref, terms, n_rows)
    else:
        return None
    own = _accumulation(err, per_element, unit, ref, n_rows)
    eager = np.zeros(n_rows) if eager_err is None else _accumulation(eager_err, per_element, unit, ref, n_rows)
    return own, eager, witnessed, scale


def eager_row_errors(eager_out, ref: Reference, output: int = 0) -> float | None:
    """eager's max abs error over the finite elements of output `output` (for the record)."""
    outs = as_outputs(eager_out)
    if output >= len(outs):
        return None
    eager_out, ref = outs[output], ref.each[output]
    if tuple(eager_out.shape) != tuple(ref.out.shape):
        return None
    err, _ = _errors(eager_out, ref)
    finite = err[np.isfinite(err)]
    return _num(finite.max()) if finite.size else None
