"""`make bench`: what it calls identical between a cold and a warm run, its one-line usage errors, and the
pieces of its cold nightly shard (harness.commands.bench_shard): which cases, the ideal, the timeline and
the fixed start, each on a small real input or a synthetic timeline (the shard itself takes minutes)."""
import json
import subprocess
import sys
import time

import pytest
from helpers import ROOT, record

from harness.commands import bench, bench_shard
from harness.commands.bench_shard import FixedStart, ShardRun, Span


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
    assert bench_shard.main(["--jobs", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 4 and all(line.startswith(("bench: error:", "bench_shard: error:")) for line in err)


def test_the_shard_is_half_the_nightly_suite_in_case_order_and_no_structure_split():
    from cases.suites import suite

    first, other, nightly = bench_shard.shard_specs(), bench_shard.shard_specs((2, 2)), suite("nightly")
    assert [s.case_id for s in first] == sorted(s.case_id for s in first)  # in case-id order, whatever the suite's
    assert sorted(s.case_id for s in first + other) == sorted(s.case_id for s in nightly)
    assert not {s.structure_key() for s in first} & {s.structure_key() for s in other}  # each compiled in one part
    assert abs(len(first) - len(nightly) / 2) <= len(nightly) * 0.05


def test_the_ideal_counts_each_structures_first_compile_and_every_run_over_the_jobs():
    def r(path, key, prepare, run, hit=False):
        return {"path": path, "structure_key": key, "prepare_seconds": prepare, "run_seconds": run, "cache_hit": hit}

    records = [r("tvm", "a", 4.0, 0.1), r("tvm", "a", 0.0, 0.1, hit=True), r("tvm", "b", 2.0, 0.2),
               r("inductor", "a", 6.0, 0.1),
               r("tvm", "a", 3.0, 0.1)]  # a stolen tail compiles "a" again: the ideal counts one compile
    assert bench_shard.limit_seconds(records, 2) == pytest.approx((4.0 + 2.0 + 6.0 + 0.6) / 2)


def test_an_execution_spans_its_seconds_and_its_attribution_back_from_when_its_record_arrived():
    records = [{"seconds": 2.0}, {"seconds": 1.0, "attribution_seconds": 0.5}, {"seconds": None}]
    assert bench_shard.spans(records, [5.0, 6.0, 7.0]) == [Span(3.0, 5.0), Span(4.5, 6.0), Span(7.0, 7.0)]


def test_idle_core_seconds_count_what_no_execution_used_at_most_jobs_at_a_time():
    bridge = [Span(1.0, 3.0), Span(3.0, 10.0)]
    worker = [Span(4.0, 6.0), Span(5.9, 9.0)]  # overlapping by the parent's delay: one worker still
    assert bench_shard.idle_core_seconds(bridge + worker, 2, 5.0) == pytest.approx(2 * 5.0 - 4.0 - 1.0)
    assert bench_shard.idle_core_seconds(bridge + worker + [Span(4.0, 9.0)], 2, 9.0) == \
        pytest.approx(2 * 9.0 - 8.0 - 5.0 - 0.0)  # three at a time count as two
    assert bench_shard.idle_core_seconds([], 2, 3.0) == 6.0


def test_the_fixed_start_is_until_the_forkserver_is_warm_split_into_its_parts():
    t0 = 1000.0
    warm_lines = [
        {"pid": 2, "worker": True, "end": t0 + 2.5, "entries": [["onnxruntime", t0 + 1.5, t0 + 2.4]]},  # a bridge
        {"pid": 3, "worker": False, "end": t0 + 12.0,
         "entries": [["torch._dynamo", t0 + 2.0, t0 + 3.0], ["harness.paths.inductor:warm_up", t0 + 3.0, t0 + 9.0],
                     ["tvm", t0 + 9.0, t0 + 11.5]]},
    ]
    timeline = [Span(2.6, 12.5), Span(12.2, 13.0)]
    start = bench_shard.fixed_start(t0, (t0 + 0.1, t0 + 1.3), warm_lines, timeline, 2,
                                    frozenset({"harness.paths.inductor:warm_up"}))
    assert start == FixedStart(torch_s=pytest.approx(1.2), forkserver_begins_s=2.0, forkserver_s=10.0,
                               inductor_s=6.0, first_execution_s=2.6, idle_core_s=pytest.approx(24.0 - 9.4))
    assert start.seconds == 12.0
    assert start.line().startswith("fixed_start_s: 12.0  torch_in_parent_s: 1.2  forkserver_warm_s: 10.0")
    no_server = bench_shard.fixed_start(t0, (t0, t0 + 1.0), warm_lines[:1], timeline, 2, frozenset())
    assert (no_server.seconds, no_server.inductor_s) == (2.6, 0.0)


def test_the_shard_line_prints_limit_ratio_first():
    start = FixedStart(1.0, 2.0, 10.0, 6.0, 2.6, 14.6)
    line = ShardRun(6734, 230.0, 200.0, start, 1).line()
    assert line == "limit_ratio: 1.15  shard_cold_s: 230.0  shard_ideal_s: 200.0  shard_executions: 6734"


def test_watch_stamps_each_record_line_when_it_appears_holding_a_torn_one_back(tmp_path):
    results = tmp_path / "results.jsonl"
    writer = ("import sys, time\nfh = open(sys.argv[1], 'w')\n"
              "for part in ['{\"a\": 1}\\n', '{\"b\"', ': 2}\\n', '{\"c\": 3}\\n']:\n"
              "    fh.write(part); fh.flush(); time.sleep(0.3)\n"
              "print('done', file=sys.stderr)\n")
    proc = subprocess.Popen([sys.executable, "-c", writer, str(results)], stderr=subprocess.PIPE, text=True)
    arrivals, err = bench_shard.watch(proc, str(results), time.time())
    assert len(arrivals) == 3 and arrivals == sorted(arrivals)
    assert arrivals[1] - arrivals[0] >= 0.5  # "b" counted once whole, not when its first half appeared
    assert err.strip() == "done"


def test_the_shards_process_times_its_torch_import_then_runs_the_command(tmp_path):
    stamp = tmp_path / "torch.json"
    r = subprocess.run([sys.executable, "-m", "harness.commands.bench_shard", "--child", str(stamp),
                        "run", "--jobs", "x"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    begin, end = json.loads(stamp.read_text())["torch"]
    assert 0 < end - begin < 120
    assert r.returncode == 2 and "--jobs" in r.stderr  # `normdiff run`'s own usage error, in the same process
