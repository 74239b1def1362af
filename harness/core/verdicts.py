"""The verdicts of an execution and the statuses of the gate, defined once.

Both are `StrEnum`s: a member *is* its string, so records stay plain JSON
with the very strings of docs/contracts.md §3 and comparisons with strings read from a
results file just work.
"""
from __future__ import annotations

import math
from enum import StrEnum


class Verdict(StrEnum):
    """What one execution of a case on a path gave (docs/contracts.md §3)."""

    PASS = "pass"
    INACCURATE = "inaccurate"
    DTYPE_MISMATCH = "dtype_mismatch"
    SHAPE_MISMATCH = "shape_mismatch"
    NONFINITE = "nonfinite"
    ERROR = "error"
    CRASH = "crash"
    TIMEOUT = "timeout"
    UNSUPPORTED = "unsupported"


VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)
# The verdicts that say a path ran and its output is wrong (not that it could not run).
WRONG_OUTPUT = frozenset({Verdict.INACCURATE, Verdict.DTYPE_MISMATCH, Verdict.SHAPE_MISMATCH, Verdict.NONFINITE})
# The verdicts that say the path did not finish (an exception, a dead worker, the clock).
NO_OUTPUT = frozenset({Verdict.ERROR, Verdict.CRASH, Verdict.TIMEOUT})
# Everything a search counts as a finding: all but pass and a documented unsupported.
FAILING = WRONG_OUTPUT | NO_OUTPUT
# The verdicts of a scored output in order of precedence (docs/contracts.md §3): the order the comparator checks
# an output in, and which output of several sets an execution's verdict (`worst`).
SCORED = (Verdict.SHAPE_MISMATCH, Verdict.DTYPE_MISMATCH, Verdict.NONFINITE, Verdict.INACCURATE, Verdict.PASS)


def worst(scores) -> int:
    """The index of the score (anything with a `verdict` and a `max_err_over_tol`) that sets the verdict of an
    execution of several outputs: the first by the verdicts' precedence (SCORED), among equals the one
    furthest over its bound, then the first. The one rule: the scorer picks by it, and a record derives
    which output it names (`verdict_output`) from its scores by it."""
    def badness(k):
        s = scores[k]
        over = s.max_err_over_tol if s.max_err_over_tol is not None else (math.inf if s.verdict != Verdict.PASS else 0.0)
        return SCORED.index(s.verdict) if s.verdict in SCORED else len(SCORED), -over, k
    return min(range(len(scores)), key=badness)


class Status(StrEnum):
    """An execution seen against the gate's baseline."""

    PASS = "PASS"
    XFAIL = "XFAIL"
    FLAKY = "FLAKY"
    NEW_FAIL = "NEW_FAIL"
    FIXED = "FIXED"
    MISSING = "MISSING"


GATE_FAILS = frozenset({Status.NEW_FAIL, Status.FIXED, Status.MISSING})

DEFAULT_TIMEOUT = 300.0  # seconds per execution, the first compile of its structure included
DEFAULT_OUT = "reports/latest"  # where run, merge and bugs --check write unless told otherwise
