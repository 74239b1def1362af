"""The scheduler: a long group of one structure is split across idle workers, only when that pays."""
import time
from collections import Counter

from helpers import CRASHY_PATHS, ROOT
from helpers import small_layer_norm as ln

from harness.engine.run import run
from harness.spec import CaseSpec


def test_a_long_group_is_split_across_idle_workers(tmp_path, monkeypatch):
    specs = [CaseSpec.from_dict(ln(seed=i)) for i in range(16)]  # one structure: one group of 16
    monkeypatch.setenv("NORMDIFF_EXTRA_PATHS", CRASHY_PATHS)
    monkeypatch.syspath_prepend(ROOT)
    start = time.monotonic()
    records = run(specs, ["slow"], str(tmp_path), jobs=2, progress=False)
    took = time.monotonic() - start
    assert Counter((r["case_id"], r["path"]) for r in records) == Counter((s.case_id, "slow") for s in specs)
    assert all(r["verdict"] == "pass" for r in records)
    misses = sum(not r["cache_hit"] for r in records)
    assert 2 <= misses <= 3  # split, but not into pieces smaller than a compile is worth
    assert took < 60


# -- ordering: longest compiles first ------------------------------------------------------

def _groups(*items):
    """Pending groups (path, structure seed, tasks) of small layer_norm specs."""
    from collections import deque

    from harness.engine.plan import Group, Task

    out = []
    for path, seed, n in items:
        spec = CaseSpec.from_dict(ln(seed=seed, params={"kind": "normal"}))  # the seed is part of the structure
        out.append(Group(path, spec.structure_key(), deque(Task(spec, path) for _ in range(n))))
    return out


def test_the_first_groups_are_the_paths_earlier_runs_found_slowest_to_compile():
    from harness.engine.scheduler import Runner, _Estimates

    runner = Runner(jobs=2)
    runner.pending = _groups(("tvm", 1, 4), ("executorch-xnnpack", 2, 4), ("eager", 3, 4))
    runner.estimates = _Estimates({"tvm": 1.6, "executorch-xnnpack": 4.4, "eager": 0.0})
    assert [runner._next_group().path for _ in range(3)] == ["executorch-xnnpack", "tvm", "eager"]


def test_a_group_the_cache_holds_costs_a_restore_and_waits(tmp_path):
    from harness import paths
    from harness.engine.cache import ArtifactCache
    from harness.engine.scheduler import Runner, _Estimates, mark_cached

    cache = ArtifactCache(str(tmp_path))
    groups = _groups(("executorch-xnnpack", 1, 4), ("tvm", 2, 4))
    spec = groups[0].tasks[0].spec
    cache.put(cache.key(paths.get("executorch-xnnpack"), spec), "executorch-xnnpack", b"a kept program", {})
    mark_cached(groups, cache)
    assert [g.cached for g in groups] == [True, False]
    runner = Runner(jobs=2)
    runner.pending, runner.estimates = groups, _Estimates({"tvm": 1.6, "executorch-xnnpack": 4.4})
    assert runner._next_group().path == "tvm"  # the compile first; the restore later


def test_affinity_gives_way_to_the_longest_group_at_the_end():
    from harness.engine.scheduler import Runner, _Estimates

    runner = Runner(jobs=2)
    groups = _groups(("tvm", 1, 1), ("executorch-xnnpack", 2, 1), ("eager", 1, 1))
    runner.estimates = _Estimates({"tvm": 1.0, "executorch-xnnpack": 4.0, "eager": 0.1})
    just_ran = groups[0].structure  # the worker just ran tvm on structure 1
    runner.pending = list(groups[1:])
    assert runner._next_group(just_ran).path == "executorch-xnnpack"  # little left: the longest, not eager's
    runner.pending = _groups(*[("tvm", s, 20) for s in range(4, 12)]) + [groups[2]]
    assert runner._next_group(just_ran).path == "eager"  # much left: structure 1's other path, its export in memo


def test_compile_estimates_are_kept_in_the_cache_folder_for_the_next_run(tmp_path):
    from harness.engine.cache import ArtifactCache
    from harness.engine.scheduler import _Estimates, load_estimates, save_estimates

    cache = ArtifactCache(str(tmp_path))
    assert load_estimates(cache) == {} and load_estimates(None) == {}
    est = _Estimates()
    for seconds in (2.0, 4.0, 3.0):
        est.add({"path": "tvm", "verdict": "pass", "prepare_seconds": seconds, "seconds": seconds + 0.01,
                 "cache_hit": False, "artifact_cache": "miss"})
    est.add({"path": "onnxruntime", "verdict": "pass", "prepare_seconds": 9.0, "seconds": 9.0,
             "cache_hit": False, "artifact_cache": "miss"})  # one sample: not kept
    save_estimates(cache, est)
    assert load_estimates(cache) == {"tvm": 3.0}
    (tmp_path / "estimates.json").write_text("{torn")
    assert load_estimates(cache) == {}


# -- bridges: workers forked at once, working while the forkserver imports -------------------

def test_a_bridge_starts_with_the_family_with_most_tasks_per_second_of_imports():
    from harness.engine.scheduler import Runner

    runner = Runner(jobs=2)
    runner.pending = _groups(("eager", 1, 4), ("onnxruntime", 1, 4), ("onnxruntime-fused", 1, 4),
                             ("executorch", 1, 4))
    # ONNX's imports are cheap and cover eager's: 12 tasks, where eager alone had 4 (too little to fill the wait)
    assert runner._family(set(), set()) == ["eager", "onnxruntime", "onnxruntime-fused"]
    assert runner._family({"eager", "onnxruntime", "onnxruntime-fused"}, set()) == ["eager", "executorch"]
    runner.pending = _groups(("eager", 1, 4))
    assert runner._family({"eager"}, set()) == []


def test_a_bridge_whose_paths_are_done_takes_another_family_until_a_warm_worker_arrives():
    from harness.engine.procs import Worker
    from harness.engine.scheduler import Runner

    runner = Runner(jobs=2)
    runner.pending = _groups(("tvm", 1, 4), ("tvm-decompose", 1, 4), ("executorch", 2, 2))
    bridge = Worker(process=None, conn=None, log="", born=0.0, paths=frozenset({"eager"}))
    runner.workers = [bridge]
    assert runner._widen(bridge)  # the forkserver still imports: the bridge imports TVM itself
    assert bridge.paths == {"eager", "tvm", "tvm-decompose"}
    assert runner._next_group("", bridge.paths).path in ("tvm", "tvm-decompose")
    runner.workers.append(Worker(process=None, conn=None, log="", born=0.0))  # a warm worker is here
    assert not runner._widen(bridge)  # now a fresh one from the forkserver takes the bridge's place
    assert bridge.paths == {"eager", "tvm", "tvm-decompose"}
