"""The sensitivity table re-decides judged outputs from their measured rows, as the comparator does."""
import numpy as np

from harness.benchmark import sensitivity
from harness.benchmark.bench import NORMDIFF, Outcome
from harness.spec import CaseSpec

SPEC = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 8]})


def _outcome(kind, own, eager=0.0, witness=0.0, scale=1.0, flag=None):
    rows = (np.array([own]), np.array([eager]), np.array([witness]), np.array([scale]))
    if flag is None:
        flag = bool(sensitivity.flagged(Outcome(SPEC, "x", kind, "", "", "", None, {}, rows), 2.0, 1 / 12))
    return Outcome(SPEC, f"impl-{kind}", kind, "", "pass", "", None, {NORMDIFF: flag}, rows)


def test_a_row_is_flagged_over_the_multiplier_times_eager_and_the_witnesses_and_over_the_floor():
    o = _outcome("wrong", own=0.3, eager=0.1, witness=0.12)
    assert sensitivity.flagged(o, 2.0, 1 / 12)        # 0.3 > 2 x 0.12 and > 1/12
    assert not sensitivity.flagged(o, 3.0, 1 / 12)    # 0.3 < 3 x 0.12
    assert not sensitivity.flagged(_outcome("wrong", own=0.05), 2.0, 1 / 12)  # under the floor
    assert sensitivity.flagged(_outcome("wrong", own=0.05, scale=0.0), 2.0, 1 / 12)  # no floor (an infinite bound)


def test_outputs_decided_by_another_verdict_keep_their_flag_and_the_own_pair_is_consistent():
    decided = Outcome(SPEC, "dtype", "wrong", "dtype", "dtype_mismatch", "", None, {NORMDIFF: True}, None)
    outcomes = [decided, _outcome("wrong", 0.3, 0.1), _outcome("correct", 0.15, 0.1), _outcome("correct", 0.01)]
    assert sensitivity.flagged(decided, 4.0, 1.0)
    assert sensitivity.consistent(outcomes) == 0
    text = sensitivity.table(outcomes)
    assert "re-decides 0 outputs differently" in text
    assert len(text.splitlines()[0].split()) == 3 + len(sensitivity.FLOORS)


def test_the_bound_as_a_cap_flags_what_the_witnesses_excuse_over_the_bound():
    # a correct sequential sum at 1.3x the bound, a witness at 1.1x: excused by 2x the witness, not by a cap
    o = _outcome("correct", own=1.3, witness=1.1)
    assert not sensitivity.flagged(o, 2.0, 1 / 12) and sensitivity._capped(o)
    assert sensitivity._beside_old(_outcome("correct", own=1.3, eager=0.1, witness=1.2))
    assert "false alarms 1/1" in sensitivity.outer_limits([o])
