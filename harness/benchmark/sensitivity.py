"""How the benchmark's figures move with the rule's two constants (`oracle-check --sensitivity`).

A compiled path's row is `inaccurate` when its error is more than
EAGER_MULTIPLIER x eager's and the witnesses' and more than FLOOR x the
floor's scale (harness.oracle.compare.measured_rows gives all four per row).
The table re-decides every output the rule judged (a pass or an inaccurate
record) for each pair of MULTIPLIERS x FLOORS; outputs a verdict of another
kind decided (dtype, shape, non-finite) keep their flag. The pair the
comparator uses must reproduce its own verdicts: `consistent` says so.
"""
from __future__ import annotations

import numpy as np

from harness.oracle.compare import EAGER_MULTIPLIER, FLOOR

MULTIPLIERS = (1.5, 2.0, 3.0, 4.0)
FLOORS = (0.0, 1.0 / 24, 1.0 / 12, 1.0 / 6)
NORMDIFF = "normdiff"


def flagged(outcome, multiplier: float, floor: float) -> bool:
    """Whether normdiff flags the outcome's output under the given constants."""
    if outcome.rows is None:
        return outcome.flags[NORMDIFF]
    own, eager, witness, scale = outcome.rows
    return bool((own > np.maximum(multiplier * np.maximum(eager, witness), floor * scale)).any())


def consistent(outcomes) -> int:
    """How many judged outputs the comparator's own constants re-decide differently (0 when faithful)."""
    return sum(flagged(o, EAGER_MULTIPLIER, FLOOR) != o.flags[NORMDIFF] for o in outcomes if o.kind != "left-out")


def table(outcomes) -> str:
    wrong = [o for o in outcomes if o.kind == "wrong"]
    correct = [o for o in outcomes if o.kind == "correct"]
    head = "multiplier \\ floor " + "".join(f"{f'{f:.4g}':>22}" for f in FLOORS)
    lines = [head]
    for m in MULTIPLIERS:
        cells = []
        for f in FLOORS:
            d = sum(flagged(o, m, f) for o in wrong)
            a = sum(flagged(o, m, f) for o in correct)
            cells.append(f"{100.0 * d / max(len(wrong), 1):5.1f} % {a:>4}/{len(correct)}")
        lines.append(f"{m:<19g}" + "".join(f"{c:>22}" for c in cells))
    lines.append(f"(detected %, false alarms; the comparator's own pair re-decides {consistent(outcomes)} "
                 "outputs differently)")
    return "\n".join(lines)
