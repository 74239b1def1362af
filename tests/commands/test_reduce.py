"""`normdiff reduce` from the command line: a norm with its neighbours reduces to at most half its ops, still
failing on the path with the same verdict and passing on eager; a target that passes, and a path that is
unknown, are one line and exit 2."""
import json

from harness.engine.execute import Executor
from harness.search.reduce_steps import count_ops
from harness.spec import CaseSpec

PATH = "tvm-decompose"
# The TVM seed's float16 layer norm, preceded by a residual add (of zeros) and followed by a scale (of ones)
# and a cast: four ops, of which only the norm is the bug.
NEIGHBOURS = {
    "pattern": "layer_norm", "dtype": "float16", "shape": [2, 4096], "input": {"kind": "alternating", "amplitude": 0.25},
    "inputs": {"r": {"kind": "constant", "value": 0.0}},
    "program": "h = x + r\nn = F.layer_norm(h, (h.shape[-1],), w, b, eps)\no = n * s\nreturn o.float()",
}


def test_a_norm_with_its_neighbours_reduces_to_at_most_half_its_ops(cli, tmp_path):
    target = tmp_path / "neighbours.json"
    target.write_text(json.dumps(NEIGHBOURS))
    out = tmp_path / "reduced.json"
    r = cli("reduce", str(target), "--path", PATH, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    steps = [line for line in r.stderr.splitlines() if line.startswith("normdiff reduce: step ")]
    assert steps and all(" ops left, max error " in line for line in steps)
    reduced = CaseSpec.from_dict(json.loads(out.read_text()))
    assert count_ops(reduced) * 2 <= count_ops(CaseSpec.from_dict(NEIGHBOURS))
    executor = Executor()
    assert executor.execute(reduced, PATH)["verdict"] == "inaccurate"
    assert executor.execute(reduced, "eager")["verdict"] == "pass"


def test_a_target_that_passes_is_one_line_and_exit_2(cli_here, tmp_path):
    target = tmp_path / "passing.json"
    target.write_text(json.dumps({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 16]}))
    r = cli_here("reduce", str(target), "--path", PATH)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and f"does not fail on {PATH}" in r.stderr


def test_an_unknown_path_or_the_control_is_one_line_and_exit_2(cli_here, tmp_path):
    target = tmp_path / "case.json"
    target.write_text(json.dumps({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 16]}))
    for path, said in (("no-such-path", "unknown path"), ("eager", "control")):
        r = cli_here("reduce", str(target), "--path", path)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and said in r.stderr


def test_a_path_that_is_not_installed_is_one_line_and_exit_2(cli, tmp_path):
    target = tmp_path / "case.json"
    target.write_text(json.dumps({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 16]}))
    r = cli("reduce", str(target), "--path", "absent-library",
            env={"NORMDIFF_EXTRA_PATHS": "absent-library=tests.plugin_paths:AbsentLibraryPath"})
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "normdiff-no-such-distribution, which is not installed" in r.stderr


def test_an_interrupted_reduction_exits_130_and_writes_nothing(tmp_path):
    """Ctrl-C as a terminal sends it (the whole group), to a process started with Ctrl-C's default action
    (one started with SIGINT ignored, as a shell's background job is, keeps ignoring it)."""
    import os
    import signal
    import subprocess
    import sys

    from helpers import ROOT, seed

    out = tmp_path / "reduced.json"
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # exec resets a handler to SIG_DFL
    try:
        proc = subprocess.Popen([sys.executable, "-m", "harness", "reduce", seed("tvm-20909.json"), "--path", PATH,
                                 "-o", str(out)], cwd=ROOT, stderr=subprocess.PIPE, text=True, start_new_session=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    first = proc.stderr.readline()  # the target judged: the reduction is under way
    assert f"on {PATH}: inaccurate" in first
    os.killpg(proc.pid, signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(timeout=300) == 130, rest
    assert "interrupted; nothing written" in rest and "Traceback" not in rest and not out.exists()
