"""make bench's where-the-time-goes lines: each path's compile against run seconds from a run's records, and the
structures suites share (one compile for both through the artifact cache)."""
from harness.commands.bench_where import shared_line, shared_structures, time_per_path
from harness.engine.cache import ArtifactCache
from harness.engine.execute import Executor
from harness.spec import CaseSpec

LAYER = {"pattern": "layer_norm", "dtype": "float16", "shape": [4, 64]}
INPUTS = ({"kind": "normal"}, {"kind": "uniform", "low": -1.0, "high": 3.0})


def test_a_paths_compile_is_its_first_prepare_and_its_run_every_execution(tmp_path):
    records = []
    for cache in (ArtifactCache(str(tmp_path)), ArtifactCache(str(tmp_path))):  # cold, then warm
        executor = Executor(cache)
        records += [executor.execute({**LAYER, "input": i}, p).to_dict()
                    for p in ("eager", "executorch-recompose") for i in INPUTS]
    times = {t.path: t for t in time_per_path(records)}
    recompose = times["executorch-recompose"]
    assert (recompose.executions, recompose.builds, recompose.restores) == (4, 1, 1)  # one compile, one restore
    mine = [r for r in records if r["path"] == "executorch-recompose"]
    assert recompose.compile_s == sum(r["prepare_seconds"] for r in mine) > 0
    assert recompose.run_s == sum(r["run_seconds"] for r in mine) > 0
    assert abs(recompose.compile_s + recompose.run_s + recompose.setup_s - sum(r["seconds"] for r in mine)) < 1e-6
    assert times["eager"].builds == 2 and times["eager"].restores == 0  # eager keeps no artifact: built each run
    assert recompose.static_controls == 0 and "compile" in recompose.text() and "static" not in recompose.text()


def test_a_structure_two_suites_share_is_counted_for_both():
    a = [CaseSpec.from_dict({**LAYER, "input": i}) for i in INPUTS]  # one structure, two inputs
    b = [CaseSpec.from_dict(LAYER), CaseSpec.from_dict({**LAYER, "dtype": "bfloat16"})]
    c = [CaseSpec.from_dict({**LAYER, "shape": [4, 32]})]
    keys = {n: {s.structure_key() for s in specs} for n, specs in (("a", a), ("b", b), ("c", c))}
    assert [(s.suite, s.shared, s.structures) for s in shared_structures(keys)] == [("a", 1, 1), ("b", 1, 2),
                                                                                    ("c", 0, 1)]
    assert shared_line(keys) == "structures_shared_across_suites: a=1/1  b=1/2  c=0/1"


def test_bad_usage_is_one_line_and_exit_2(tmp_path, capsys):
    from harness.commands.bench_where import main

    assert main([]) == 2 and main(["--help"]) == 2 and main([str(tmp_path / "missing.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and err[2].startswith("bench_where: error: ")
