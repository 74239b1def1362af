"""The benchmark's ground truth: which outputs are materially wrong, decided without the oracle under test.

A correct implementation is correct by construction. A wrong implementation's
output is **materially wrong** when

1. its dtype differs from eager's (or its shape from the input's), or
2. it is non-finite (NaN/Inf) where the FP64 reference is finite, on a row
   where eager and every correct implementation are finite (a program that
   overflows its own float16 cast gives NaN by every correct implementation:
   no harm done there), or
3. some element's error against the FP64 reference is more than FACTOR times
   the largest error that eager or any correct implementation makes on that
   element's normalization row, *and* more than one ULP of the output dtype
   at the reference value (so a last-bit difference on a row all of them get
   exactly right is not a bug).

Every other wrong output is left out: neither a detection nor an alarm,
since an implementation that is as accurate as the correct ones on this case
did nothing wrong here, whatever its bug. Nothing in the rule is the
oracle's: no error bound, no tolerance constant, only measured errors of
outputs that are known to be right.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.dtypes import name_of, ulp
from harness.core.verdicts import Verdict
from harness.oracle.reference import Reference

FACTOR = 4.0


@dataclass(frozen=True)
class Truth:
    wrong: bool              # materially wrong (only ever True for a wrong implementation)
    # The verdict the output deserves by this rule (shape, dtype, non-finite, or beyond the
    # correct implementations' error: inaccurate); None when it is not materially wrong.
    reason: Verdict | None


def element_errors(out: np.ndarray, ref: Reference) -> np.ndarray:
    """|out - ref| per element in float64; inf where out is non-finite."""
    y = np.asarray(out).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(y - ref.out)
    return np.where(np.isfinite(err), err, np.inf)


def row_max(err: np.ndarray, ref: Reference) -> np.ndarray:
    """The largest error on each normalization row."""
    n_rows = int(ref.rows.max()) + 1
    out = np.zeros(n_rows)
    np.maximum.at(out, ref.rows.ravel(), err.ravel())
    return out


def baseline_rows(outputs: list[np.ndarray], ref: Reference) -> np.ndarray:
    """Per row, the largest error of the given known-good outputs (eager and the correct implementations)."""
    usable = [o for o in outputs if o is not None and tuple(o.shape) == tuple(ref.out.shape)]
    return np.max([row_max(element_errors(o, ref), ref) for o in usable], axis=0)


def judge(out: np.ndarray, ref: Reference, expected_dtype: str, baseline: np.ndarray) -> Truth:
    """Whether a wrong implementation's `out` is materially wrong (see the module docstring)."""
    if tuple(out.shape) != tuple(ref.out.shape):
        return Truth(True, Verdict.SHAPE_MISMATCH)
    if name_of(out.dtype) != expected_dtype:
        return Truth(True, Verdict.DTYPE_MISMATCH)
    y = np.asarray(out).astype(np.float64)
    if (~np.isfinite(y) & np.isfinite(ref.out) & np.isfinite(baseline[ref.rows])).any():
        return Truth(True, Verdict.NONFINITE)
    err = element_errors(out, ref)
    beyond = (err > FACTOR * baseline[ref.rows]) & (err > ulp(ref.out, name_of(out.dtype)))
    if beyond.any():
        return Truth(True, Verdict.INACCURATE)
    return Truth(False, None)
