"""The forkserver forked from the run's process: it holds none of that process's descriptors, its
workers report exit codes and signals as the spawned forkserver's do, and they start with the
warm imports frozen out of the collector and the collector running."""
import json
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
    assert [m for m in every if ":" not in m] == cached  # the imports stay: a restore needs the runtime
