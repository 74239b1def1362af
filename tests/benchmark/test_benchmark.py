"""The oracle's benchmark: implementations through the real runner, the ground-truth rule, the anchors."""
import os

import numpy as np
import pytest

from harness import paths
from harness.benchmark import anchors, bench, implementations, truth
from harness.benchmark.grid import cases
from harness.core.dtypes import cast, ulp
from harness.spec import CaseSpec
from harness.engine.execute import Executor
from harness.oracle.inputs import make_inputs
from harness.oracle.reference import reference

LN = {"pattern": "layer_norm", "shape": [4, 256], "params": {"kind": "normal"}}


@pytest.fixture(autouse=True, scope="module")
def registered():
    """The implementations as paths for this module's tests only: other tests see the registry unchanged."""
    before = os.environ.get(paths.ENV)
    yield implementations.register_all()
    if before is None:
        os.environ.pop(paths.ENV, None)
    else:
        os.environ[paths.ENV] = before


def spec(**changes):
    return CaseSpec.from_dict({**LN, "dtype": "float16", **changes})


@pytest.mark.parametrize("name", ["bench-exact", "bench-two-pass", "bench-welford", "bench-exact-ulp-up",
                                  "bench-two-pass-sequential", "bench-two-pass-lanes", "bench-welford-blocks"])
def test_correct_implementations_pass_through_the_real_runner(name):
    record = Executor().execute(spec(), name)
    assert record["verdict"] == "pass", record["message"]
    assert record["facts"] == {"implementation": name, "correct": True}


@pytest.mark.parametrize("name, verdict", [
    ("bench-stats-in-input-dtype", "nonfinite"), ("bench-lost-cast-back", "dtype_mismatch"),
    ("bench-wrong-axis", "inaccurate"), ("bench-weight-dropped", "inaccurate"),
])
def test_wrong_implementations_are_flagged(name, verdict):
    # offset 1000: the float16 sum of 256 values near 1000 overflows (65,504), the rest is far off
    record = Executor().execute(spec(input={"kind": "offset", "offset": 1000, "std": 1}), name)
    assert record["verdict"] == verdict, record["message"]


def test_a_bug_class_that_does_not_apply_is_unsupported():
    record = Executor().execute(spec(dtype="float32"), "bench-count-in-input-dtype")
    assert record["verdict"] == "unsupported" and "float32" in record["message"]


def _ref(s):
    return reference(s, make_inputs(s))


def test_ground_truth_counts_dtype_nonfinite_and_errors_far_beyond_the_correct_ones():
    s = spec(dtype="float32")
    ref = _ref(s)
    good = cast(ref.out, "float32")
    base = truth.baseline_rows([good], ref)
    assert truth.judge(good.astype(np.float16), ref, "float32", base) == truth.Truth(True, "dtype")
    nan = good.copy()
    nan[0, 0] = np.nan
    assert truth.judge(nan, ref, "float32", base).reason == "nonfinite"
    # the row's largest value 3 ULPs off, where the known-good output is at most half an ULP off
    # anywhere on the row: materially wrong
    j = int(np.argmax(np.abs(ref.out[1])))
    off = good.astype(np.float64)
    off[1, j] += 3 * ulp(off[1, j], "float32")
    assert truth.judge(cast(off, "float32"), ref, "float32", base) == truth.Truth(True, "error")
    # where a known-good output is itself one ULP off everywhere, an output one ULP off is not wrong
    up = np.nextafter(good, np.float32(np.inf))
    one = good.astype(np.float64)
    one[1, j] += ulp(one[1, j], "float32")
    assert not truth.judge(cast(one, "float32"), ref, "float32", truth.baseline_rows([good, up], ref)).wrong


def test_ground_truth_leaves_out_a_nonfinite_row_the_correct_outputs_share():
    s = spec(dtype="float32")
    ref = _ref(s)
    good = cast(ref.out, "float32")
    shared = good.copy()
    shared[1, :] = np.nan  # eager (or a correct implementation) is NaN on row 1 as well
    nan = good.copy()
    nan[1, 3] = np.nan
    assert not truth.judge(nan, ref, "float32", truth.baseline_rows([good, shared], ref)).wrong
    assert truth.judge(nan, ref, "float32", truth.baseline_rows([good], ref)).reason == "nonfinite"


def test_ground_truth_leaves_out_what_a_correct_implementation_does_as_badly():
    s = spec(dtype="float32")
    ref = _ref(s)
    sloppy = cast(ref.out * (1 + 1e-5), "float32")  # a correct implementation this far off everywhere
    base = truth.baseline_rows([sloppy], ref)
    assert not truth.judge(cast(ref.out * (1 + 3e-5), "float32"), ref, "float32", base).wrong
    assert truth.judge(cast(ref.out * (1 + 1e-4), "float32"), ref, "float32", base).wrong


def test_anchors_flag_a_gross_error_and_pass_eager_itself():
    ref = _ref(spec())
    eager = cast(ref.out, "float16")
    bad = cast(ref.out * 1.5, "float16")
    for name, oracle in anchors.ANCHORS.items():
        assert oracle(bad, eager, ref.out), name
        assert not oracle(eager, eager, ref.out), name


def test_a_quick_slice_of_the_benchmark_scores_every_oracle_on_the_same_outputs():
    specs = [s for s in cases(quick=True) if s.pattern == "layer_norm" and s.dtype == "float16"][:6]
    outcomes = bench.collect(specs)
    kinds = {o.kind for o in outcomes}
    assert {"correct", "wrong"} <= kinds
    for o in outcomes:
        if o.kind != "left-out":
            assert set(o.flags) == {bench.NORMDIFF, *anchors.ANCHORS}
    text = bench.render(outcomes)
    d, w, a, c = bench.tally(outcomes)[bench.NORMDIFF]
    assert text.splitlines()[-1] == f"oracle-check: detected {d}/{w}, false alarms {a}/{c}"
    assert w > 0 and d == w and a == 0


def test_the_program_benchmark_and_both_summary_lines_last(monkeypatch, capsys):
    from harness.benchmark import program_grid, program_implementations

    programs = bench.collect(program_grid.cases(quick=True)[::300], names=program_implementations.register_all())
    d, w, a, c = bench.tally(programs)[bench.NORMDIFF]
    assert w > 0 and d >= 0.9 * w and a == 0 and c > 0
    assert {o.implementation for o in programs} <= {program_implementations.PREFIX + k for k in
                                                    {**program_implementations.CORRECT, **program_implementations.WRONG}}
    catalog = bench.collect([s for s in cases(quick=True) if s.pattern == "rms_norm"][:1])
    monkeypatch.setattr(bench, "run_benchmarks", lambda which, quick, jobs, detail: {"programs": programs,
                                                                                    "catalog": catalog})
    assert bench.main(["--quick"]) == (0 if bench.meets_target(catalog) else 1)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2] == f"oracle-check programs: detected {d}/{w}, false alarms {a}/{c}"  # before the catalog line
    assert lines[-1] == bench.summary(catalog) and lines[-1].startswith("oracle-check: detected ")
