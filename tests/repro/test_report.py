"""`normdiff repro TARGET --report` (harness/repro/report.py) through the real command line, on the TVM seed.

The seed's own report (apache/tvm#20909) is the yardstick: its controls pass
(the rewrite off, float32 inside, float32 input), its values are ±1.414 for
±1, its script exits 1.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness.repro.report import REPORT, SHORT, STAMP
from helpers import normdiff, seed


@pytest.fixture(scope="module")
def seed_report(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("report") / "tvm-20909")
    done = normdiff("repro", "tvm-20909", "--report", "-o", folder)
    assert done.returncode == 0, done.stderr
    return folder


def _read(folder, name=REPORT):
    with open(os.path.join(folder, name), encoding="utf-8") as fh:
        return fh.read()


@pytest.mark.xdist_group("seed_report")  # its module fixture once, on one worker
def test_the_seeds_report_has_its_values_and_its_controls_pass(seed_report):
    text = _read(seed_report)
    assert text.startswith("# [tvm-decompose] DecomposeOpsForTraining: float16 layer_norm inaccurate, "
                           "max abs error 0.4141 (848.2 ULP of float16, 209x the bound)\n")
    assert "rounded to float16 [-1.0, 1.0, -1.0, 1.0]. Eager PyTorch gives [-1.0, 1.0, -1.0, 1.0] (float16)" in text
    assert "`tvm-decompose` returns [-1.4140625, 1.4140625, -1.4140625, 1.4140625] (float16)" in text
    assert "first stage over its bound is `return:layer_norm.variance`" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0] for row in rows] == ["| rewrite off", "| float32 inside", "| float32 input"]
    assert all(" | passes (max abs err" in row for row in rows), rows
    assert "| `tvm` |" in rows[0] and "layer_norm upcast float16" in rows[1] and "module float32" in rows[2]
    assert "Its output (exit status 1):" in text and "- Libraries: apache-tvm 0.27.0.post1" in text


@pytest.mark.xdist_group("seed_report")  # its module fixture once, on one worker
def test_the_short_script_is_pasted_short_and_exits_1(seed_report):
    short = _read(seed_report, SHORT)
    assert len(short.splitlines()) <= 100
    assert "```python\n" + short + "```" in _read(seed_report)
    done = subprocess.run([sys.executable, SHORT], cwd=seed_report, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    assert "tvm-decompose (float16): [-1.4140625, 1.4140625, -1.4140625, 1.4140625]" in done.stdout
    full = [n for n in os.listdir(seed_report) if n.startswith("repro-")]
    assert full == ["repro-052c6ae297e3-tvm-decompose.py"]


@pytest.mark.xdist_group("seed_report")  # its module fixture once, on one worker
def test_the_same_target_gives_the_same_bytes_but_the_stamp(seed_report, cli_here, tmp_path):
    """The fixture's report came from a fresh interpreter; this one from this process: the same bytes."""
    again = str(tmp_path / "again")
    done = cli_here("repro", "tvm-20909", "--report", "-o", again)
    assert done.returncode == 0, done.stderr
    for name in os.listdir(seed_report):
        first, second = _read(seed_report, name), _read(again, name)
        if name == REPORT:
            first, second = ([line for line in t.splitlines() if not line.startswith(STAMP)] for t in (first, second))
        assert first == second, name


def test_a_target_that_passes_is_one_line_and_exit_2(cli_here, tmp_path):
    done = cli_here("repro", seed("tvm-20909.json"), "--path", "tvm", "--report", "-o", str(tmp_path / "r"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "passes on tvm" in done.stderr and "nothing to report" in done.stderr
    assert not os.path.exists(tmp_path / "r")


def test_a_path_that_is_not_installed_is_one_line_and_exit_2(tmp_path):
    done = normdiff("repro", "tvm-20909", "--path", "absent-library", "--report", "-o", str(tmp_path / "r"),
                    env={"NORMDIFF_EXTRA_PATHS": "absent-library=tests.plugin_paths:AbsentLibraryPath"})
    assert done.returncode == 2
    assert done.stderr == ("normdiff: error: path absent-library is not installed here "
                           "(needs the normdiff-no-such-distribution package)\n")
    assert not os.path.exists(tmp_path / "r")
