"""The persistent artifact cache: an entry is trusted only whole and for its own key, the size bound
evicts the least recently used, two processes can share it, and a hit runs exactly as a miss did."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from harness import paths
from harness.paths.base import Path
from harness.spec import CaseSpec
from harness.engine.cache import ArtifactCache, max_bytes_from_env
from harness.engine.execute import Executor, comparable
from harness.oracle.inputs import make_inputs
from harness.oracle.modules import build_module
from harness.core.tensors import to_torch
from helpers import ROOT

SPEC = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [4, 64],
                           "params": {"kind": "normal"}})
OTHER_INPUT = SPEC.replace(input={"kind": "uniform", "low": -1.0, "high": 3.0})


def key(i: int) -> str:
    return f"{i:064x}"


# -- entries ------------------------------------------------------------------

def test_an_entry_reads_back_with_its_facts(tmp_path):
    cache = ArtifactCache(str(tmp_path))
    assert cache.get(key(1)) is None
    assert cache.put(key(1), "tvm", b"\x00library\xff", {"tvm_ops": ["relax.nn.layer_norm"], "b": 1})
    entry = cache.get(key(1))
    assert entry.data == b"\x00library\xff" and entry.facts == {"tvm_ops": ["relax.nn.layer_norm"], "b": 1}
    assert list(entry.facts) == ["tvm_ops", "b"]  # the facts keep their order, as records show them
    assert cache.stats.hits == 1 and cache.stats.misses == 1


def test_an_entry_file_gets_the_mode_open_would_give_it(tmp_path):
    """0644 under umask 022 (mkstemp made it 0600): a cache folder shared by a team stays readable."""
    put = ("import sys; from harness.engine.cache import ArtifactCache; "
           f"assert ArtifactCache(sys.argv[1]).put({key(1)!r}, 'tvm', b'x', {{}})")
    subprocess.run([sys.executable, "-c", put, str(tmp_path)], cwd=ROOT, umask=0o022, check=True, timeout=120,
                   env=dict(os.environ, PYTHONPATH=ROOT))
    cache = ArtifactCache(str(tmp_path))
    assert os.stat(cache.file_of(key(1))).st_mode & 0o777 == 0o644 and cache.get(key(1)).data == b"x"


@pytest.mark.parametrize("damage", ["truncated", "flipped", "empty", "no_header", "other_format", "other_key"])
def test_a_corrupt_partial_or_foreign_entry_is_dropped_not_trusted(tmp_path, damage):
    cache = ArtifactCache(str(tmp_path))
    cache.put(key(1), "tvm", b"A" * 1000, {})
    cache.put(key(2), "tvm", b"B" * 1000, {})
    target = cache.file_of(key(1))
    raw = open(target, "rb").read()
    if damage == "truncated":  # a writer killed mid-write (had it not renamed)
        raw = raw[:-10]
    elif damage == "flipped":  # a bit flipped on disk
        raw = raw[:-1] + b"C"
    elif damage == "empty":
        raw = b""
    elif damage == "no_header":
        raw = raw[:raw.index(b"\n") + 5]
    elif damage == "other_format":
        raw = raw.replace(b'"format": 1', b'"format": 99')
    elif damage == "other_key":  # an entry copied under another name
        raw = open(cache.file_of(key(2)), "rb").read()
    open(target, "wb").write(raw)
    assert cache.get(key(1)) is None
    assert not os.path.exists(target) and cache.stats.rejected == 1
    assert cache.get(key(2)).data == b"B" * 1000  # the others are untouched


def test_the_key_covers_path_structure_versions_and_format_but_not_the_input(monkeypatch, tmp_path):
    cache = ArtifactCache(str(tmp_path))
    tvm, dec = paths.get("tvm"), paths.get("tvm-decompose")
    k = cache.key(tvm, SPEC)
    assert cache.key(tvm, OTHER_INPUT) == k  # same structure: same artifact
    assert cache.key(tvm, SPEC.replace(shape=[4, 128])) != k
    assert cache.key(dec, SPEC) != k
    monkeypatch.setattr(tvm, "artifact_version", 2)  # a path that changes what it stores: old entries are stale
    assert ArtifactCache(str(tmp_path)).key(tvm, SPEC) != k
    monkeypatch.undo()
    parts = ArtifactCache(str(tmp_path)).key_parts(tvm)
    assert set(parts["packages"]) == {"torch", "apache-tvm"} and parts["normdiff"] and parts["code"]
    assert ArtifactCache(str(tmp_path)).key(tvm, SPEC) == k  # stable across processes' objects


def test_which_paths_are_cacheable():
    assert {n for n in paths.default_names() if not paths.get(n).artifact_cacheable} == {"eager"}  # eager builds nothing
    for name in paths.default_names():  # declared where, and only where, artifact and restore are implemented
        cls = type(paths.get(name))
        assert cls.artifact_cacheable == (cls.artifact is not Path.artifact and cls.restore is not Path.restore)


def test_the_size_bound_evicts_least_recently_used(tmp_path):
    probe = ArtifactCache(str(tmp_path / "probe"))
    probe.put(key(0), "x", bytes(1000), {})
    size = os.path.getsize(probe.file_of(key(0)))  # an entry: the bytes and its header
    cache = ArtifactCache(str(tmp_path / "c"), max_bytes=5 * size + size // 2)
    for i in range(5):
        cache.put(key(i), "x", bytes([i]) * 1000, {})
        os.utime(cache.file_of(key(i)), (1000 + i, 1000 + i))  # written in order 0..4
    assert cache.get(key(0)) is not None  # a hit touches it: now the most recent
    for i in range(5, 7):
        cache.put(key(i), "x", bytes([i]) * 1000, {})
    assert cache.usage() <= cache.max_bytes
    alive = {i for i in range(7) if os.path.exists(cache.file_of(key(i)))}
    assert {0, 5, 6} <= alive and 1 not in alive and cache.stats.evicted >= 2


def test_a_killed_writers_leftover_is_swept(tmp_path):
    cache = ArtifactCache(str(tmp_path), max_bytes=10)
    cache.put(key(1), "x", b"z", {})
    left = os.path.join(os.path.dirname(cache.file_of(key(1))), ".tmp-dead")
    open(left, "wb").write(b"half")
    os.utime(left, (1, 1))
    cache.evict()
    assert not os.path.exists(left)


def test_a_bad_size_bound_is_one_line_exit_2(cli_here, tmp_path, monkeypatch):
    case = tmp_path / "case.json"
    case.write_text(SPEC.to_json())
    common = ["run", "--case", str(case), "--paths", "eager", "--quiet", "--out", str(tmp_path / "o")]
    for value in ("0", "-1", "lots"):
        monkeypatch.setenv("NORMDIFF_CACHE_MAX_GB", value)
        r = cli_here(*common)
        assert r.returncode == 2 and "NORMDIFF_CACHE_MAX_GB" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    r = cli_here(*common, "--no-cache", "--jobs", "0")  # the bound is still "lots"
    assert r.returncode == 0, r.stderr  # --no-cache reads no bound
    monkeypatch.setenv("NORMDIFF_CACHE_MAX_GB", "0.5")
    assert max_bytes_from_env() == 2**29


def test_cache_and_no_cache_exclude_each_other_and_a_file_is_refused(cli_here, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    for args in (["--cache", str(tmp_path), "--no-cache"], ["--cache", str(f)]):
        r = cli_here("run", "--paths", "eager", "--quiet", "--out", str(tmp_path / "o"), *args)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


_SHARER = r"""
import hashlib, random, sys
from harness.engine.cache import ArtifactCache
cache = ArtifactCache(sys.argv[1], max_bytes=40 * 20000)
rng = random.Random(int(sys.argv[2]))
bad = 0
for n in range(400):
    i = rng.randrange(60)
    key = f"{i:064x}"
    data = hashlib.sha256(key.encode()).digest() * (200 + 300 * (i % 3))  # the same bytes for a key, everywhere
    entry = cache.get(key)
    if entry is None:
        cache.put(key, "x", data, {"i": i})
    elif entry.data != data or entry.facts != {"i": i}:
        bad += 1
print(bad, cache.stats.hits, cache.stats.rejected)
"""


def test_two_processes_share_one_cache_safely(tmp_path):
    """Concurrent readers, writers and evictions on the same keys: nothing torn is ever read."""
    procs = [subprocess.Popen([sys.executable, "-c", _SHARER, str(tmp_path), str(seed)], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in (1, 2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
        bad, hits, rejected = map(int, out.split())
        assert bad == 0 and rejected == 0 and hits > 0
    cache = ArtifactCache(str(tmp_path), max_bytes=40 * 20000)
    assert cache.usage() <= 2 * cache.max_bytes  # each writer overshoots by at most what it wrote unmeasured
    cache.evict()
    assert cache.usage() <= cache.max_bytes
    for i in range(60):
        assert cache.get(key(i)) is None or cache.get(key(i)).facts == {"i": i}
    leftovers = [f for d in os.listdir(tmp_path / "v1") for f in os.listdir(tmp_path / "v1" / d)
                 if f.startswith(".tmp-")]
    assert not leftovers


# -- through the executor (compiles) --------------------------------------------

def _strip(record):
    return json.dumps(comparable(record), sort_keys=False)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["tvm", "executorch", "executorch-xnnpack", "onnxruntime", "onnxruntime-fused",
                                  "executorch-recompose", "executorch-recompose-capture", "inductor-emulate"])
def test_a_hit_runs_bit_identically_to_the_miss_that_stored_it(tmp_path, path):
    p = paths.get(path)
    inputs = make_inputs(SPEC)
    build = lambda: (build_module(SPEC, inputs.params), to_torch(inputs.x, SPEC.layout))  # noqa: E731
    built = p.prepare(SPEC, *build())
    restored = p.restore(SPEC, p.artifact(built), **({"build": build} if p.restore_takes_build else {}))
    for spec in (SPEC, OTHER_INPUT):
        x = make_inputs(spec).x
        a, b = built.run(x), restored.run(x)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()

    cache = ArtifactCache(str(tmp_path))
    cold, warm = Executor(cache), Executor(cache)  # as two runs' workers
    first = [cold.execute(s, path) for s in (SPEC, OTHER_INPUT)]
    again = [warm.execute(s, path) for s in (SPEC, OTHER_INPUT)]
    assert [r["artifact_cache"] for r in first] == ["miss", "miss"]  # the second reused the first in memory
    assert [r["artifact_cache"] for r in again] == ["hit", "hit"]
    assert first[1]["cache_hit"] and not again[0]["cache_hit"]
    assert [_strip(r) for r in first] == [_strip(r) for r in again]  # same verdict, errors, facts
    assert again[0]["prepare_seconds"] < first[0]["prepare_seconds"]


@pytest.mark.slow
def test_a_failure_to_build_is_kept_and_gives_the_same_record(tmp_path):
    """ONNX Runtime has no bfloat16 Mul: a warm run learns it from the cache, not by exporting again."""
    spec = CaseSpec.from_dict({"pattern": "rms_norm", "style": "qwen", "dtype": "bfloat16", "shape": [2, 16]})
    cold = Executor(ArtifactCache(str(tmp_path))).execute(spec, "onnxruntime")
    cache = ArtifactCache(str(tmp_path))
    warm = Executor(cache).execute(spec, "onnxruntime")
    assert cold["verdict"] == "unsupported" and (cold["artifact_cache"], warm["artifact_cache"]) == ("miss", "hit")
    assert _strip(cold) == _strip(warm) and cache.stats.hits == 1


@pytest.mark.slow
def test_a_kept_attribution_is_the_one_computed(tmp_path):
    """The seed's recompose failure: its attribution (a to_edge and a node-by-node re-run) is kept per execution."""
    spec = CaseSpec.from_dict({"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 8, 64],
                               "params": {"kind": "normal"}})
    cold = Executor(ArtifactCache(str(tmp_path))).execute(spec, "executorch-recompose")
    warm = Executor(ArtifactCache(str(tmp_path))).execute(spec, "executorch-recompose")
    assert cold["verdict"] == "dtype_mismatch" and cold["facts"]["attribution"] == "read" and cold["attribution"]
    assert _strip(cold) == _strip(warm) and warm["artifact_cache"] == "hit"
    assert Executor().execute(spec, "executorch-recompose")["attribution"] == cold["attribution"]  # no cache at all


@pytest.mark.slow
def test_an_entry_that_fails_to_restore_is_rebuilt(tmp_path):
    cache = ArtifactCache(str(tmp_path))
    path = paths.get("executorch")
    k = cache.key(path, SPEC)
    cache.put(k, path.name, b"not a program, but with a valid checksum", {"edge_ops": ["forged"]})
    record = Executor(cache).execute(SPEC, path.name)
    assert record["artifact_cache"] == "miss" and record["facts"]["edge_ops"] != ["forged"]
    assert cache.stats.rejected == 1
    assert cache.get(k).data[4:8] == b"ET12"  # the forged entry was replaced by a real .pte program
    assert Executor(cache).execute(SPEC, path.name)["artifact_cache"] == "hit"


def test_the_libraries_caches_go_under_ours_or_off(tmp_path, monkeypatch):
    """Importing torch._inductor sets TORCHINDUCTOR_CACHE_DIR to torch's folder in /tmp: ours replaces it."""
    import torch._inductor.compile_fx  # noqa: F401 - sets the variable, as the forkserver's imports do
    import torch.compiler.config

    from harness.engine.cache import library_caches

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/torchinductor_someone")
    with library_caches(ArtifactCache(str(tmp_path))):
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        assert cache_dir() == str(tmp_path / "inductor")
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/tmp/torchinductor_someone"  # as it was after the run
    flag = torch.compiler.config.force_disable_caches
    with library_caches(None):  # --no-cache
        assert torch.compiler.config.force_disable_caches
    assert torch.compiler.config.force_disable_caches == flag


def test_paths_without_artifacts_and_no_cache_say_so(tmp_path):
    cached = Executor(ArtifactCache(str(tmp_path))).execute(SPEC, "eager")
    plain = Executor().execute(SPEC, "eager")
    assert cached["artifact_cache"] == "unsupported" and plain["artifact_cache"] == "off"
    assert not os.path.exists(tmp_path / "v1")


@pytest.mark.slow
def test_a_second_cli_run_hits_the_cache_with_the_same_verdicts(cli, tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(s.to_json() + "\n" for s in (SPEC, OTHER_INPUT)))
    # two paths across processes: TVM's artifact and Inductor's precompiled function (every path's hit from
    # the disk, bit for bit, is test_a_hit_runs_bit_identically_to_the_miss_that_stored_it)
    common = ["--case", str(cases), "--paths", "tvm,inductor", "--jobs", "1",
              "--quiet", "--cache", str(tmp_path / "cache")]
    runs = []
    for name in ("cold", "warm"):
        start = time.monotonic()
        r = cli("run", *common, "--out", str(tmp_path / name))
        assert r.returncode in (0, 1), r.stderr[-2000:]
        records = [json.loads(line) for line in open(tmp_path / name / "results.jsonl")]
        runs.append((time.monotonic() - start, sorted(records, key=lambda r: (r["case_id"], r["path"]))))
    (_, cold), (_, warm) = runs
    origin = {(r["path"], r["artifact_cache"]) for r in warm}
    assert origin == {("tvm", "hit"), ("inductor", "hit")}
    assert {r["artifact_cache"] for r in cold} == {"miss"}
    # Inductor's precompiled function is kept: the warm run neither traces nor compiles, and its facts say so
    caches = ("inductor_precompiled", "inductor_aot_autograd_cache", "inductor_fx_graph_cache")
    assert {tuple(r["facts"][k] for k in caches) for r in cold if r["path"] == "inductor"} == {("miss", "miss", "off")}
    assert {tuple(r["facts"][k] for k in caches) for r in warm if r["path"] == "inductor"} == {("hit", "off", "off")}
    assert os.listdir(tmp_path / "cache" / "inductor")
    assert [_strip(r) for r in cold] == [_strip(r) for r in warm]
    assert np.isfinite([r["max_abs_err"] for r in warm]).all()
