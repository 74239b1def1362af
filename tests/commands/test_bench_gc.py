"""The collector bench (harness/commands/bench_gc.py): both sides, alternating, as workers set up, and their ratios."""
import gc
import json
import subprocess
import sys

from harness.commands.bench_gc import PYTHON_THRESHOLDS, groups, main
from harness.engine.worker import WORKER_GC_THRESHOLDS
from helpers import ROOT


def test_each_side_is_a_worker_with_its_thresholds_and_the_records_are_the_same(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness.commands.bench_gc", "--rounds", "1", "--paths",
                           "eager,executorch-recompose", "--structures", "1,0,0,0"], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env={"PYTHONPATH": ROOT, "PATH": "/usr/bin:/bin",
                                                          "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    *sides, ratios = proc.stdout.strip().splitlines()
    python, workers = map(json.loads, sides)
    assert (python["side"], python["thresholds"]) == ("python", list(PYTHON_THRESHOLDS))
    assert (workers["side"], workers["thresholds"]) == ("workers", list(WORKER_GC_THRESHOLDS))
    assert python["structures"] == workers["structures"] == 1 and python["records"] == workers["records"]
    assert python["cpu_s"] > 0 and workers["peak_rss_mb"] > 0
    # the compile's objects: Python's young generation is collected many times, the workers' far fewer
    assert python["collections"][0] > workers["collections"][0]
    assert ratios.startswith("gc_cpu_ratio: ") and ratios.endswith("records_identical: yes")
    assert gc.get_threshold() != WORKER_GC_THRESHOLDS  # set in the sides' processes, not in this one


def test_the_structures_are_spaced_over_each_suite_with_their_first_inputs():
    cases = groups([2, 1, 0, 0])
    assert len(cases) == 3 and all(1 <= len(g) <= 2 for g in cases)
    assert all(len({s.structure_key() for s in g}) == 1 for g in cases)  # a group is one structure's cases
    assert len({g[0].structure_key() for g in cases}) == 3


def test_bad_usage_is_one_line_and_exit_2(capsys):
    assert main(["--paths", "no-such-path"]) == 2
    assert main(["--structures", "1,2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bench_gc: error: unknown path 'no-such-path'", "bench_gc: error: bad --structures or --rounds"]
