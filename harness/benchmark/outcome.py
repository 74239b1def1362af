"""One implementation's output on one benchmark case (or one gradient of it): what it is and who flags it."""
from __future__ import annotations

from dataclasses import dataclass, field

from harness.core.verdicts import Verdict
from harness.spec import CaseSpec

NORMDIFF = "normdiff"


@dataclass
class Outcome:
    """One implementation's output on one case: what it is and who flags it."""

    spec: CaseSpec
    implementation: str
    kind: str                 # "correct", "wrong" (materially wrong) or "left-out"
    reason: Verdict | None    # the ground truth's verdict for a materially wrong output
    verdict: Verdict          # normdiff's verdict
    message: str
    over_tol: float | None    # normdiff's largest error in units of its bound
    flags: dict[str, bool] = field(default_factory=dict)
    rows: tuple | None = None  # compare.measured_rows of the output, when asked for (sensitivity)
