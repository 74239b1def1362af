"""The forkserver forked from the run's process: it holds none of that process's descriptors, its
workers report exit codes and signals as the spawned forkserver's do, and they start with the
warm imports frozen out of the collector and the collector running."""
import json
import os
import subprocess
import sys

from helpers import ROOT

SCRIPT = r'''
import gc, json, multiprocessing as mp, os, select, sys
from multiprocessing import forkserver
from harness.engine.warm import start_forkserver

def frozen():
    os._exit(0 if gc.get_freeze_count() > 0 and gc.isenabled() else 1)

if __name__ == "__main__":
    r, w = os.pipe()  # stands for the run's pipes, results file and folder lock
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([])
    start_forkserver(["json.tool"], fork=True)
    server = forkserver._forkserver
    os.close(w)
    ready, _, _ = select.select([r], [], [], 20)
    eof = bool(ready) and os.read(r, 1) == b""  # nobody else holds the write end
    codes = {}
    for name, target, args in (("exit", os._exit, (3,)), ("abort", os.abort, ()), ("frozen", frozen, ())):
        p = ctx.Process(target=target, args=args)
        p.start()
        p.join(60)
        codes[name] = p.exitcode
    pid = server._forkserver_pid
    server._stop()  # waits for it: it is this process's child
    print(json.dumps({"eof": eof, "codes": codes, "own_child": pid is not None and server._forkserver_pid is None,
                      "gc_here": gc.isenabled() and gc.get_freeze_count() == 0}))
'''


def test_forked_forkserver(tmp_path):
    script = tmp_path / "forked.py"
    script.write_text(SCRIPT)
    r = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["eof"], "the forkserver kept a descriptor of the process it was forked from"
    assert out["codes"] == {"exit": 3, "abort": -6, "frozen": 0}
    assert out["own_child"]
    assert out["gc_here"]  # the calling process's collector is left as it was


def test_a_warm_up_runs_in_the_warm_process_only_for_paths_with_compiles_to_do(tmp_path, monkeypatch):
    from harness.engine.warm import warm, warm_modules

    (tmp_path / "warm_probe.py").write_text("CALLS = []\ndef up():\n    CALLS.append(1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    warm(["warm_probe:up", "warm_probe:nothing_of_that_name"])  # a failing warm-up is skipped, as an import is
    import warm_probe

    assert warm_probe.CALLS == [1]
    every = warm_modules(["tvm", "executorch-xnnpack"])
    cached = warm_modules(["tvm", "executorch-xnnpack"], compiling=["tvm"])
    assert "harness.paths.executorch_xnnpack:warm_up" in every and "harness.paths.executorch_xnnpack:warm_up" not in cached
    from harness import paths

    tvm_ups = [m for m in paths.get("tvm").warm_imports if ":" in m]
    assert tvm_ups  # the frontend memo
    assert [m for m in every if ":" not in m or m in tvm_ups] == cached  # the imports stay: a restore needs the runtime
    # Inductor's kept function is loaded by code that probes the CPU first: that part runs even when all is cached
    restored = warm_modules(["inductor"], compiling=[])
    assert "harness.paths.inductor:warm_up_loader" in restored and "harness.paths.inductor:warm_up" not in restored
    assert "harness.paths.inductor:warm_up" in warm_modules(["inductor"], compiling=["inductor"])


RETIRED = r'''
import json, os, sys, time
from multiprocessing import forkserver
from harness.engine import warm

if __name__ == "__main__":
    warm.start_forkserver(["json"], fork=True)
    first = forkserver._forkserver._forkserver_pid
    warm.retire_forkserver(["json"])  # covered: kept
    kept = forkserver._forkserver._forkserver_pid == first
    holder = os.fork()  # a child of this process holds the forkserver's "alive" pipe open
    if holder == 0:
        time.sleep(30)
        os._exit(0)
    start = time.monotonic()
    warm.retire_forkserver(["json", "json.tool"])  # not covered: stopped, without waiting on the holder
    quick = time.monotonic() - start < 5
    warm.start_forkserver(["json", "json.tool"], fork=True)
    second = forkserver._forkserver._forkserver_pid
    os.kill(holder, 9)
    os.waitpid(holder, 0)
    print(json.dumps({"kept": kept, "quick": quick, "fresh": second not in (None, first)}))
'''


def test_a_forkserver_warmed_for_other_modules_is_replaced_without_waiting(tmp_path):
    script = tmp_path / "retired.py"
    script.write_text(RETIRED)
    r = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"kept": True, "quick": True, "fresh": True}


PROBE = r'''
import json, sys, tempfile
from multiprocessing import forkserver
from harness.engine.run import run
from harness.spec import CaseSpec

spec = CaseSpec.from_dict({"class": "probe_norm:RMS", "dtype": "float16", "shape": [2, 16]})
records = run([spec], ["tvm"], tempfile.mkdtemp(dir=sys.argv[1]), jobs=1, progress=False)
with open(f"/proc/{forkserver._forkserver._forkserver_pid}/maps") as fh:
    print(json.dumps({"verdicts": [str(r["verdict"]) for r in records], "tvm": "libtvm" in fh.read()}))
'''
NORM = '''import torch
class RMS(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(16))
    def forward(self, x):
        h = x.float()
        return self.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)
'''


def test_the_workers_of_a_run_with_module_cases_fork_from_a_forkserver_warmed_for_its_paths(tmp_path):
    """The module cases are resolved first on workers that import torch alone; the run's own workers
    must not reuse that forkserver and import TVM each for itself."""
    (tmp_path / "probe_norm.py").write_text(NORM)
    (tmp_path / "probe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    r = subprocess.run([sys.executable, str(tmp_path / "probe.py"), str(tmp_path)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"verdicts": ["pass"], "tvm": True}, out


INDUCTOR_CACHE = r'''
import json, os, sys
from harness.engine.cache import ArtifactCache
from harness.engine.run import run
from harness.spec import CaseSpec

if __name__ == "__main__":
    base = sys.argv[1]
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 16]})
    records = run([spec], ["inductor"], os.path.join(base, "out"), jobs=1, progress=False,
                  cache=ArtifactCache(os.path.join(base, "cache")))
    print(json.dumps([str(r["verdict"]) for r in records]))
'''


def test_the_warm_ups_write_what_they_compile_into_the_runs_cache_not_under_tmp(tmp_path):
    """Inductor's warm-up probes the CPU's vector ISA by compiling test programs into Inductor's cache
    folder: the run's, kept with the artifact cache from night to night, not torch's default in /tmp
    (into an empty folder the probe costs several times what it costs with them there)."""
    (tmp_path / "inductor_cache.py").write_text(INDUCTOR_CACHE)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # TMPDIR: where torch's default Inductor folder would be. Torch keeps its precompiled headers there
    # whatever the cache folder ("these headers need to be global"): off here, or this test would build
    # them anew (a large build, paid by every run), and then nothing of Inductor's at all may be in that folder.
    env = {**os.environ, "TMPDIR": str(tmp), "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "0"}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    r = subprocess.run([sys.executable, str(tmp_path / "inductor_cache.py"), str(tmp_path)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == ["pass"]
    assert list((tmp_path / "cache" / "inductor").rglob("*.so"))
    assert not [p for p in tmp.rglob("*") if p.is_file() and "torchinductor" in str(p)]


TIMES_SCRIPT = r'''
import multiprocessing as mp, os
from multiprocessing import forkserver
from harness.engine.warm import start_forkserver, warm

def bridge():
    warm(["wave"])

if __name__ == "__main__":
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([])
    start_forkserver(["json.tool", "colorsys"], fork=True)
    p = ctx.Process(target=os._exit, args=(0,))  # forked once the forkserver's warm-up is done
    p.start()
    p.join(60)
    b = mp.get_context("fork").Process(target=bridge)
    b.start()
    b.join(60)
    warm(["os"])  # imported already: nothing to note
    forkserver._forkserver._stop()
'''


def test_with_the_times_variable_each_warm_up_that_imports_notes_its_entries_and_its_process(tmp_path):
    from harness.engine.warm import WARM_TIMES_ENV

    script, times = tmp_path / "times.py", tmp_path / "warm.jsonl"
    script.write_text(TIMES_SCRIPT)
    r = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, WARM_TIMES_ENV: str(times)})
    assert r.returncode == 0, r.stderr[-2000:]
    lines = sorted((json.loads(line) for line in times.read_text().splitlines()), key=lambda w: w["worker"])
    assert [(w["worker"], [e[0] for e in w["entries"]]) for w in lines] == [
        (False, ["json.tool", "colorsys"]), (True, ["wave"])]  # the forkserver, then the multiprocessing child
    for w in lines:
        assert all(a <= b <= w["end"] for _, a, b in w["entries"])
        assert w["pid"] != os.getpid()
