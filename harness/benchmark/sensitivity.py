"""How the benchmark's figures move with the rule's two constants (`oracle-check --sensitivity`).

A compiled path's row is `inaccurate` when its error is more than
EAGER_MULTIPLIER x eager's and the witnesses' and more than FLOOR x the
floor's scale (harness.oracle.compare.measured_rows gives all four per row).
The table re-decides every output the rule judged (a pass or an inaccurate
record) for each pair of MULTIPLIERS x FLOORS; outputs a verdict of another
kind decided (dtype, shape, non-finite) keep their flag. The pair the
comparator uses must reproduce its own verdicts: `consistent` says so.

`outer_limits` tries the two ways the running bound could limit the rule on
a program (where the unit is the bound: a row's error of 1 is the bound):
as a cap (the multiplier's slack ends at the bound: a row over the bound is
excused only by eager or a witness over it), or as the old rule kept beside
the new (over the bound and worse than 2x eager, whatever the witnesses).
`alarms_by` says which correct outputs a smaller floor would flag.
"""
from __future__ import annotations

from collections import Counter

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


def _capped(outcome) -> bool:
    own, eager, witness, scale = outcome.rows
    allowed = np.maximum(EAGER_MULTIPLIER * np.maximum(eager, witness), FLOOR * scale)
    cap = np.where(scale > 0, np.maximum(1.0, np.maximum(eager, witness)), np.inf)  # bounded rows only
    return bool((own > np.minimum(allowed, cap)).any())


def _beside_old(outcome) -> bool:
    own, eager, witness, scale = outcome.rows
    old = (scale > 0) & (own > 1.0) & (own > EAGER_MULTIPLIER * eager)
    return flagged(outcome, EAGER_MULTIPLIER, FLOOR) or bool(old.any())


def outer_limits(outcomes) -> str:
    wrong = [o for o in outcomes if o.kind == "wrong"]
    correct = [o for o in outcomes if o.kind == "correct"]
    lines = []
    for what, rule in (("the bound as a cap on the multiplier's slack", _capped),
                       ("the old rule (over the bound, 2x eager) beside the new", _beside_old)):
        decide = lambda o: o.flags[NORMDIFF] if o.rows is None else rule(o)  # noqa: E731
        d, a = sum(decide(o) for o in wrong), sum(decide(o) for o in correct)
        lines.append(f"{what:55} detected {d}/{len(wrong)}, false alarms {a}/{len(correct)}")
    return "\n".join(lines)


def alarms_by(outcomes, multiplier: float = EAGER_MULTIPLIER, floor: float = 0.0) -> str:
    """The correct outputs flagged under (multiplier, floor), by implementation and input kind."""
    counts = Counter((o.implementation, o.spec.input_dict["kind"], o.spec.dtype) for o in outcomes
                     if o.kind == "correct" and flagged(o, multiplier, floor))
    return "\n".join(f"  {n:4} {impl} on {dtype} {kind} inputs" for (impl, kind, dtype), n in counts.most_common())


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
    for f in FLOORS:
        if f < FLOOR and any(flagged(o, EAGER_MULTIPLIER, f) for o in correct):
            lines.append(f"false alarms at multiplier {EAGER_MULTIPLIER:g}, floor {f:.4g}:")
            lines.append(alarms_by(outcomes, EAGER_MULTIPLIER, f))
    if any(o.rows is not None and (o.rows[3] == 1.0).any() for o in outcomes):  # a program benchmark
        lines.append(outer_limits(outcomes))
    return "\n".join(lines)
