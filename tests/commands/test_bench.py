"""`make bench`: what it calls identical between a cold and a warm run, and its one-line usage errors."""
from helpers import record

from harness.commands import bench


def test_a_warm_record_is_identical_though_its_timings_and_cache_origins_differ():
    cold = {**record("a", "inductor", "pass"), "facts": {"inductor_graphs": 1, "inductor_fx_graph_cache": "miss",
                                                         "inductor_aot_autograd_cache": "miss"},
            "artifact_cache": "unsupported", "prepare_seconds": 9.0}
    warm = {**cold, "seconds": 0.1, "prepare_seconds": 0.3, "cache_hit": True,
            "facts": {**cold["facts"], "inductor_fx_graph_cache": "hit", "inductor_aot_autograd_cache": "hit"}}
    assert bench.outcomes([cold]) == bench.outcomes([warm])
    for changed in ({"verdict": "inaccurate"}, {"max_abs_err": 0.2}, {"facts": {**cold["facts"], "inductor_graphs": 2}},
                    {"attribution": [{"stage": "return:mul"}]}):
        assert bench.outcomes([cold]) != bench.outcomes([{**warm, **changed}]), changed


def test_bad_numbers_are_one_line_and_exit_2(capsys):
    assert bench.main(["--jobs", "0"]) == 2
    assert bench.main(["--fuzz-minutes", "-1"]) == 2
    assert bench.main(["--paths", "nowhere"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("bench: error:") for line in err)
