"""`run --executor ray` on a local Ray with 2 CPUs: the forkserver's verdicts, a dead actor is one
`crash` record, a hung one a `timeout`, shards and --resume as with the forkserver.

Ray is an optional extra: without it these tests are skipped (but the one-line
refusal of `--executor ray` is tested either way).
"""
import importlib.util
import json
import os
from collections import Counter

import pytest

from harness.core.records import read_results
from harness.spec import CaseSpec
from harness.engine.run import run
from helpers import CRASHY_PATHS, ROOT, TRIGGER
from helpers import small_layer_norm as ln

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (pip install 'normdiff[ray]')")
pytestmark = pytest.mark.xdist_group("ray")  # one local Ray at a time on 2 cores

SCHEDULING = {"seconds", "prepare_seconds", "run_seconds", "attribution_seconds", "cache_hit", "artifact_cache",
              "ray_node"}


def strip(records):
    return sorted(json.dumps({k: v for k, v in r.items() if k not in SCHEDULING}, sort_keys=True)
                  for r in records)


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray with 2 CPUs for the module (RayRunner joins it and leaves it running)."""
    if not HAS_RAY:
        pytest.skip("ray is not installed (pip install 'normdiff[ray]')")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def test_executor_ray_without_ray_is_one_line_exit_2(cli, tmp_path):
    hidden = tmp_path / "hide" / "ray"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text('raise ImportError("No module named \'ray\'")\n')
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "hide"), ROOT])}
    r = cli("run", "--paths", "eager", "--executor", "ray", "--out", str(tmp_path / "o"), env=env)
    assert r.returncode == 2 and "normdiff[ray]" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli("run", "--paths", "eager", "--address", "127.0.0.1:1", "--out", str(tmp_path / "o"))
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
