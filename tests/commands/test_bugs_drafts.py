"""`normdiff bugs --drafts DIR` (harness/commands/bugs.py): a report and its scripts per `new` catalog entry.

Two entries here, through the real command line: a compile error on TVM and
an inaccurate rewrite on ExecuTorch; every entry is a manual run (`normdiff
bugs --drafts DIR`, figures in docs/bugs-and-repro.md).
"""
from __future__ import annotations

import os

import pytest

from cases import bugs
from harness.commands.bugs import new_entries
from helpers import normdiff


# a compile error on TVM and an inaccurate rewrite on ExecuTorch; then two findings only normdiff's own rule
# sees (the witnesses per row; an error 2.45x a float16 bound whose plain ATOL + RTOL*|ref| envelope is twice
# as loose): their short scripts carry that rule and exit 1
WRONG = ["tvm-new-bf16-layer-norm", "executorch-new-recompose-used-twice"]
MARGINAL = ["iree-new-fp16-mean", "openvino-new-batch-norm-fp16"]


@pytest.fixture(scope="module")
def drafts(tmp_path_factory):
    """One `bugs --drafts` run of the four entries (one start of the command and its workers for both tests
    below, which xdist keeps on one worker)."""
    folder = tmp_path_factory.mktemp("drafts")
    ids = (a for i in WRONG + MARGINAL for a in ("--id", i))
    done = normdiff("bugs", "--drafts", str(folder), *ids, "--jobs", "2")
    assert done.returncode == 0, done.stderr
    assert "4 of 4 reports written whose short script exits 1" in done.stderr
    return folder


def test_new_entries_are_the_unreported_findings():
    chosen = new_entries(bugs.BUGS)
    assert chosen and all(b.link is None for b in chosen)
    assert {b.id for b in bugs.BUGS if b.link is None} == {b.id for b in chosen}


@pytest.mark.xdist_group("drafts")
def test_drafts_write_a_report_whose_script_exits_1_and_whose_controls_are_listed(drafts):
    tmp_path, ids = drafts, WRONG
    for bug_id in ids:
        folder = tmp_path / bug_id
        assert sorted(n for n in os.listdir(folder) if not n.startswith("repro-")) == ["report.md", "repro.py"]
        text = (folder / "report.md").read_text(encoding="utf-8")
        assert f"normdiff catalog entry `{bug_id}`" in text and "Its output (exit status 1):" in text
        assert "## Controls" in text and "| rewrite off |" in text and "| float32 input |" in text
    error = (tmp_path / ids[0] / "report.md").read_text(encoding="utf-8")
    assert "`tvm` fails at compile: InternalError" in error and "layer_norm: only support float32 and float16" in error
    assert "| float32 inside | the catalog's `upcast` style" in error and "| `tvm` | passes" in error
    rewrite = (tmp_path / ids[1] / "report.md").read_text(encoding="utf-8")
    assert rewrite.startswith("# [executorch-recompose] QNN RemoveRedundancy + RecomposeRmsNorm: float32 rms_norm "
                              "inaccurate")
    assert "| rewrite off | the same case on `executorch`" in rewrite
    assert "not run: the case is float32 already" in rewrite


@pytest.mark.xdist_group("drafts")
def test_the_scripts_of_marginal_findings_exit_1(drafts):
    tmp_path, ids = drafts, MARGINAL
    for bug_id in ids:
        text = (tmp_path / bug_id / "report.md").read_text(encoding="utf-8")
        assert "Its output (exit status 1):" in text and "rows failing: 1 of 4" in text


def test_drafts_and_check_together_is_bad_usage(cli_here, tmp_path):
    done = cli_here("bugs", "--drafts", str(tmp_path), "--check")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "one at a time" in done.stderr
