"""The reducer on the real paths: the TVM seed reduces to a program that still fails on tvm-decompose with the
seed's verdict and passes on eager, the same target gives the same bytes, and a target that cannot be reduced
says why in one line."""
import pytest

from harness.core.verdicts import Verdict
from harness.engine.pool import Pool
from harness.search.reduce import Judge, NotReducible, check_target, describe, program_form, reduce, same_failure
from harness.search.reduce_steps import count_ops
from harness.spec import CaseSpec, load_spec_file
from helpers import seed

PATH = "tvm-decompose"


def _record(verdict, over=None, stage=None):
    return {"verdict": verdict, "max_err_over_tol": over, "stage": stage}


def test_the_same_failure_is_the_verdict_and_an_errors_stage_with_eager_passing():
    target = _record(Verdict.INACCURATE, 140.0)
    assert same_failure(target, _record(Verdict.INACCURATE, 3.0), _record(Verdict.PASS))
    assert not same_failure(target, _record(Verdict.INACCURATE, 3.0), _record(Verdict.INACCURATE, 2.0))
    assert not same_failure(target, _record(Verdict.ERROR, stage="compile"), _record(Verdict.PASS))
    crash = _record(Verdict.ERROR, stage="compile")
    assert same_failure(crash, _record(Verdict.ERROR, stage="compile"), _record(Verdict.PASS))
    assert not same_failure(crash, _record(Verdict.ERROR, stage="run"), _record(Verdict.PASS))
    assert describe(target) == "max error 140x the bound" and describe(crash) == "error at compile"


def test_a_case_with_no_program_form_is_not_reducible():
    group = CaseSpec.from_dict({"pattern": "group_norm", "dtype": "float16", "shape": [2, 8, 4], "groups": 2})
    with pytest.raises(NotReducible, match="no program form"):
        program_form(group, lift=None)


@pytest.fixture(scope="module")
def pool():
    with Pool([PATH, "eager"]) as p:
        yield p


@pytest.mark.xdist_group("reduce_pool")  # its module fixture once, on one worker
def test_the_tvm_seed_reduces_to_a_program_failing_the_same_way_and_again_to_the_same_bytes(pool):
    target = load_spec_file(seed("tvm-20909.json"))[0]
    form = program_form(target, lift=None)
    record = check_target(target, form, Judge(pool.map, PATH))
    assert record["verdict"] == Verdict.INACCURATE
    lines = []
    outcome = reduce(form, record, Judge(pool.map, PATH), say=lines.append)
    reduced = outcome.spec
    assert reduced.style == "program" and count_ops(reduced) <= count_ops(form)
    assert outcome.steps and len(lines) == len(outcome.steps) and "ops left, max error" in lines[0]
    fresh, control = Judge(pool.map, PATH)([reduced])[0]  # judged afresh
    assert fresh["verdict"] == Verdict.INACCURATE and control["verdict"] == Verdict.PASS
    again = reduce(form, record, Judge(pool.map, PATH))
    assert again.spec.to_json() == reduced.to_json() and [s.what for s in again.steps] == [s.what for s in outcome.steps]


@pytest.mark.xdist_group("reduce_pool")  # its module fixture once, on one worker
def test_a_target_that_passes_is_not_reducible(pool):
    passing = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 16]})
    with pytest.raises(NotReducible, match=f"does not fail on {PATH}"):
        check_target(passing, program_form(passing, lift=None), Judge(pool.map, PATH))
