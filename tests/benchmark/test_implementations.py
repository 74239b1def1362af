"""The benchmark's implementations as paths through the real runner: the correct pass, the wrong are flagged."""
import pytest

from harness.engine.execute import Executor


@pytest.mark.parametrize("name", ["bench-exact", "bench-two-pass", "bench-welford", "bench-exact-ulp-up",
                                  "bench-two-pass-sequential", "bench-two-pass-lanes", "bench-welford-blocks"])
def test_correct_implementations_pass_through_the_real_runner(name, spec):
    record = Executor().execute(spec(), name)
    assert record["verdict"] == "pass", record["message"]
    assert record["facts"] == {"implementation": name, "correct": True}


@pytest.mark.parametrize("name, verdict", [
    ("bench-stats-in-input-dtype", "nonfinite"), ("bench-lost-cast-back", "dtype_mismatch"),
    ("bench-wrong-axis", "inaccurate"), ("bench-weight-dropped", "inaccurate"),
])
def test_wrong_implementations_are_flagged(name, verdict, spec):
    # offset 1000: the float16 sum of 256 values near 1000 overflows (65,504), the rest is far off
    record = Executor().execute(spec(input={"kind": "offset", "offset": 1000, "std": 1}), name)
    assert record["verdict"] == verdict, record["message"]


def test_a_bug_class_that_does_not_apply_is_unsupported(spec):
    record = Executor().execute(spec(dtype="float32"), "bench-count-in-input-dtype")
    assert record["verdict"] == "unsupported" and "float32" in record["message"]
