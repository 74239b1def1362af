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
