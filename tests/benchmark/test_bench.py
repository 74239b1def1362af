"""The benchmark itself: a quick slice scores every oracle on the same outputs and renders its table."""
from harness.benchmark import anchors, bench
from harness.benchmark.grid import cases


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
