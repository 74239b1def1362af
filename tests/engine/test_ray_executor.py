"""`run --executor ray` on a local Ray with 2 CPUs: the forkserver's verdicts, a dead actor is one
`crash` record (whether it aborts or is killed from outside), a hung one a `timeout`, shards and
--resume as with the forkserver.

Ray is an optional extra: without it these tests are skipped (but the one-line
refusal of `--executor ray` is tested either way), unless NORMDIFF_REQUIRE_RAY=1
(.ci/run sets it): then a missing Ray fails them.
"""
import importlib.util
import json
import os
import random
import signal
import threading
import time
from collections import Counter

import pytest

from crashy_paths import STALL_TOKEN_MIN, stall_pid_file
from harness.core.records import read_results
from harness.spec import CaseSpec
from harness.engine.run import run
from helpers import CRASHY_PATHS, ROOT, TRIGGER
from helpers import small_layer_norm as ln

HAS_RAY = importlib.util.find_spec("ray") is not None
REQUIRE_RAY = os.environ.get("NORMDIFF_REQUIRE_RAY") == "1"
needs_ray = pytest.mark.skipif(not HAS_RAY and not REQUIRE_RAY,
                               reason="ray is not installed (pip install 'normdiff[ray]')")
pytestmark = pytest.mark.xdist_group("ray")  # one local Ray at a time on 2 cores

EXTRA = CRASHY_PATHS + ",stall=tests.crashy_paths:StallPath"
SCHEDULING = {"seconds", "prepare_seconds", "run_seconds", "attribution_seconds", "cache_hit", "artifact_cache",
              "ray_node"}


def strip(records):
    return sorted(json.dumps({k: v for k, v in r.items() if k not in SCHEDULING}, sort_keys=True)
                  for r in records)


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray with 2 CPUs for the module (RayRunner joins it and leaves it running)."""
    if not HAS_RAY:
        if REQUIRE_RAY:
            pytest.fail("NORMDIFF_REQUIRE_RAY=1 but ray is not installed (make install EXTRAS=ray)")
        pytest.skip("ray is not installed (pip install 'normdiff[ray]')")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def test_executor_ray_without_ray_is_one_line_exit_2(cli, cli_here, tmp_path):
    hidden = tmp_path / "hide" / "ray"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text('raise ImportError("No module named \'ray\'")\n')
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "hide"), ROOT])}
    r = cli("run", "--paths", "eager", "--executor", "ray", "--out", str(tmp_path / "o"), env=env)
    assert r.returncode == 2 and "normdiff[ray]" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli_here("run", "--paths", "eager", "--address", "127.0.0.1:1", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--address" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@needs_ray
@pytest.mark.slow
def test_ray_gives_the_forkserver_verdicts(local_ray, tmp_path):
    specs = [CaseSpec.from_dict(s) for s in (
        {"pattern": "layer_norm", "dtype": "float16", "shape": [4, 64], "params": {"kind": "normal"}},
        {"pattern": "layer_norm", "dtype": "float16", "shape": [4, 64], "params": {"kind": "normal"},
         "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0.0}},
        {"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 8, 64], "params": {"kind": "normal"}},
    )]
    names = ["eager", "tvm", "executorch", "executorch-recompose"]
    local = run(specs, names, str(tmp_path / "local"), jobs=2, progress=False)
    on_ray = run(specs, names, str(tmp_path / "ray"), jobs=2, progress=False, executor="ray")
    assert len(on_ray) == len(specs) * len(names)
    assert strip(on_ray) == strip(local)
    assert all(r["ray_node"] for r in on_ray)
    assert read_results(str(tmp_path / "ray" / "results.jsonl")) == on_ray  # streamed to the same file


@needs_ray
def test_a_dead_actor_is_one_crash_and_a_hung_one_a_timeout(local_ray, tmp_path, monkeypatch):
    monkeypatch.setenv("NORMDIFF_EXTRA_PATHS", CRASHY_PATHS)
    monkeypatch.syspath_prepend(ROOT)
    specs = [CaseSpec.from_dict(ln(seed=0, input=i)) for i in
             ({"kind": "normal"}, TRIGGER, {"kind": "uniform", "low": 0, "high": 1}, {"kind": "normal", "std": 3})]
    records = run(specs, ["abort", "sleep", "eager"], str(tmp_path), jobs=2, timeout=8,
                  progress=False, executor="ray")
    got = Counter((r["path"], r["verdict"]) for r in records)
    assert got == Counter({("abort", "pass"): 3, ("abort", "crash"): 1, ("sleep", "pass"): 3,
                           ("sleep", "timeout"): 1, ("eager", "pass"): 4})
    crash = next(r for r in records if r["verdict"] == "crash")
    assert crash["case"]["input"] == TRIGGER and "Ray actor died" in crash["message"]
    assert len({(r["case_id"], r["path"]) for r in records}) == len(records) == 12


def _kill_when_stalled(token: int, killed: list, deadline_s: float = 120.0) -> None:
    """SIGKILL the worker that StallPath says it is stalled in, as soon as it says so."""
    target = stall_pid_file(token)
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if os.path.exists(target):
            pid = int(open(target).read())
            os.remove(target)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return
        time.sleep(0.05)


def _dead(pid: int, wait_s: float = 10.0) -> bool:
    """Whether `pid` has exited: gone, or a zombie its parent (Ray's raylet) has not reaped yet. The run sees the
    actor's death on its connection, which can come before the reaping: os.kill(pid, 0) still succeeds on a
    zombie (make test failed on that once)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


@needs_ray
def test_an_actor_killed_from_outside_mid_run_is_one_crash_and_the_rest_intact(local_ray, tmp_path, monkeypatch):
    monkeypatch.setenv("NORMDIFF_EXTRA_PATHS", EXTRA)
    monkeypatch.syspath_prepend(ROOT)
    token = random.randrange(STALL_TOKEN_MIN, 10 * STALL_TOKEN_MIN)  # this test's own trigger value
    stalled = {"kind": "constant", "value": float(token)}
    inputs = ({"kind": "normal"}, stalled, {"kind": "uniform", "low": 0, "high": 1}, {"kind": "normal", "std": 3})
    specs = [CaseSpec.from_dict(ln(seed=0, input=i)) for i in inputs]
    killed: list[int] = []
    killer = threading.Thread(target=_kill_when_stalled, args=(token, killed), daemon=True)
    killer.start()
    try:
        records = run(specs, ["stall", "eager"], str(tmp_path), jobs=2, timeout=120,
                      progress=False, executor="ray")
    finally:
        killer.join(timeout=1)
        if os.path.exists(stall_pid_file(token)):
            os.remove(stall_pid_file(token))
    assert len(killed) == 1, "the stalled actor never reported its pid"
    assert _dead(killed[0]), "the killed actor's process still runs"  # it really is gone
    got = Counter((r["path"], r["verdict"]) for r in records)
    assert got == Counter({("stall", "pass"): 3, ("stall", "crash"): 1, ("eager", "pass"): 4})
    (crash,) = [r for r in records if r["verdict"] == "crash"]
    assert crash["case"]["input"] == stalled and "Ray actor died" in crash["message"]
    assert crash["seconds"] < 120  # the death was seen, not waited out as a timeout
    assert len({(r["case_id"], r["path"]) for r in records}) == len(records) == 8
    assert read_results(str(tmp_path / "results.jsonl")) == records  # every record written once


@needs_ray
def test_shards_and_resume_on_ray_cover_every_execution_once(local_ray, tmp_path):
    from harness.engine.plan import shard

    specs = [CaseSpec.from_dict(ln(shape=[2, 8 * (1 + i % 3)], seed=i)) for i in range(6)]
    out = str(tmp_path / "out")
    first = run(shard(specs, 1, 2), ["eager"], out, jobs=2, progress=False, executor="ray")
    rest = run(specs, ["eager"], out, jobs=2, progress=False, executor="ray", resume=True)
    assert first and rest and len(first) + len(rest) == len(specs)
    written = read_results(os.path.join(out, "results.jsonl"))
    assert sorted(r["case_id"] for r in written) == sorted(s.case_id for s in specs)
    assert all(r["verdict"] == "pass" for r in written)
