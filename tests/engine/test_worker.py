"""A worker's set-up (harness/engine/worker.py): its crash stack reaches its log whatever its parent did to SIGABRT;
it collects garbage with the workers' thresholds."""
import json
import subprocess
import sys
import tempfile

import gc

from harness.engine.worker import WORKER_GC_THRESHOLDS
from helpers import CRASHY_PATHS, ROOT, TRIGGER, small_layer_norm

# A parent with faulthandler on (as pytest and a forkserver have it) whose SIGABRT handler a library then replaced
# (here: reset to the default through libc, as a C++ library's own handler would): its forked worker must put its
# handlers back, or an abort leaves an empty log.
PARENT = """
import ctypes, faulthandler, json, signal, sys, time
from harness.engine.plan import Task
from harness.engine.procs import Procs
from harness.spec import CaseSpec
faulthandler.enable()
ctypes.CDLL(None).signal(signal.SIGABRT, ctypes.c_void_p(0))
procs = Procs(["abort"], 60.0, start_method="fork")
w = procs.start()
while not w.ready:
    procs.wait([w])
    procs.check(w)
procs.send(w, Task(CaseSpec.from_dict(json.loads(sys.argv[1])), "abort"), True)
end = time.monotonic() + 60
while w.process.is_alive() and time.monotonic() < end:
    time.sleep(0.05)
kind, record = procs.check(w)
print(json.dumps([kind, record["verdict"], record.get("log_tail") or []]))
procs.close([w], graceful=False)
"""


def test_an_abort_leaves_its_stack_in_the_log_where_a_library_replaced_the_parents_handler(tmp_path):
    spec = {"pattern": "layer_norm", "dtype": "float32", "shape": [2, 8], "input": TRIGGER}
    proc = subprocess.run([sys.executable, "-c", PARENT, json.dumps(spec)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env={"PYTHONPATH": ROOT, "NORMDIFF_EXTRA_PATHS": CRASHY_PATHS,
                                                         "PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    kind, verdict, tail = json.loads(proc.stdout.splitlines()[-1])
    assert (kind, verdict) == ("failed", "crash")
    assert any(line.startswith("Fatal Python error: Aborted") for line in tail), tail
    assert any("misbehave" in line for line in tail), tail


# eager, with the collector's thresholds of the process that compiled it as a fact: what a path's compile runs under.
COLLECTOR_PATH = """
import gc
from harness.paths.eager import EagerPath

class CollectorPath(EagerPath):
    def prepare(self, spec, module, example):
        prepared = super().prepare(spec, module, example)
        prepared.facts = {**prepared.facts, "gc_threshold": list(gc.get_threshold())}
        return prepared
"""
POOL = """
import json, sys
from harness import paths
from harness.engine.pool import Pool
paths.register("collector", "collector_path:CollectorPath")
with Pool(["collector"], start_method=sys.argv[2]) as pool:
    record = pool.submit(json.loads(sys.argv[1]), "collector")
print(json.dumps([record["verdict"], record["facts"].get("gc_threshold")]))
"""


def test_a_workers_compiles_run_under_the_workers_collector_thresholds(tmp_path):
    (tmp_path / "collector_path.py").write_text(COLLECTOR_PATH)
    assert gc.get_threshold() != WORKER_GC_THRESHOLDS  # this process keeps Python's own
    for method in ("fork", "forkserver"):
        # TMPDIR: the session's, as every run the tests start has it; the forkserver's socket lives there, and an
        # AF_UNIX path (108 bytes at most) under tmp_path is too long where TMPDIR is itself a deep folder.
        proc = subprocess.run([sys.executable, "-c", POOL, json.dumps(small_layer_norm()), method],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path,
                              env={"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin",
                                   "TMPDIR": tempfile.gettempdir()})
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads(proc.stdout.splitlines()[-1]) == ["pass", list(WORKER_GC_THRESHOLDS)], method
