"""The known-bug catalog (cases/bugs.py) and `normdiff bugs [--check]`, with the real paths."""
from __future__ import annotations

import json
import os
import re

import pytest

from cases import bugs
from harness import paths
from harness.commands.bugs import status
from harness.engine.execute import execute
from harness.spec import CaseSpec
from harness.core.verdicts import Verdict
from helpers import ROOT

VERDICTS = set(Verdict) - {Verdict.PASS}


def _seed(name: str) -> CaseSpec:
    with open(os.path.join(ROOT, "cases", "seeds", name), encoding="utf-8") as fh:
        return CaseSpec.from_dict(json.load(fh))


def test_catalog_entries_are_well_formed():
    assert len(set(bugs.ids())) == len(bugs.BUGS)
    for b in bugs.BUGS:
        assert re.fullmatch(r"(tvm|executorch|pytorch|onnxruntime|iree|openvino)-[a-z0-9-]+", b.id), b.id
        assert b.expect in bugs.EXPECTS and b.verdict in VERDICTS, b.id
        assert b.specs and b.paths and b.title and b.note, b.id
        assert b.link is None or b.link.startswith("https://github.com/"), b.id
        assert (b.link is None) == ("-new-" in b.id), b.id  # unreported findings say so in their id
        for _, path in [*b.checks, *b.controls]:
            assert path in paths.names(), (b.id, path)


def test_the_seeds_are_the_committed_seed_files():
    assert bugs.get("tvm-20909").specs[0] == _seed("tvm-20909.json")
    assert bugs.get("tvm-20909").paths[0] == "tvm-decompose"
    assert bugs.get("executorch-24428-qwen-fp16").specs[0] == _seed("executorch-24428-qwen-fp16.json")
    assert bugs.get("executorch-24428-qwen-bf16").specs[0] == _seed("executorch-24428-qwen-bf16.json")
    assert bugs.get("executorch-24428-qwen-fp16").paths[0] == "executorch-recompose"
    ids = set(bugs.ids())
    for variant in ("llama", "no-dim-order", "capture", "t5", "qwen-bf16", "remove-redundancy"):
        assert f"executorch-24428-{variant}" in ids


def test_status_says_fixed_when_the_bug_is_gone():
    """An entry recorded as reproduced whose case now passes reads "fixed", not "reproduced"."""
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 16]})
    entry = bugs.Bug(id="tvm-example", link=None, title="t", specs=(spec,), paths=("eager",),
                     verdict="inaccurate", expect="reproduced", note="")
    records = {(spec.case_id, "eager"): execute(spec, "eager")}
    assert status(entry, records) == ("fixed", [])
    assert status(entry, {})[0] == "changed"  # nothing ran: neither reproduced nor fixed


def test_an_entry_whose_library_is_not_installed_is_skipped_and_says_so(capsys):
    """The zoo's findings name transformers classes: without the extra, --check skips them, and says so."""
    import argparse

    from harness.commands.bugs import cmd_check, missing

    spec = CaseSpec.from_dict({"class": "no_such_library.models.norms:Norm", "dtype": "float32", "shape": [2, 8]})
    entry = bugs.Bug(id="tvm-new-example", link=None, title="t", specs=(spec,), paths=("tvm",),
                     verdict="inaccurate", expect="reproduced", note="")
    assert entry.needs == ("no_such_library",) and missing(entry) == ["no_such_library"]
    assert cmd_check([entry], argparse.Namespace(jobs=0, timeout=60.0, out=None)) == 0
    out = capsys.readouterr()
    assert "skipped" in out.out and "needs no_such_library" in out.out and "(1 skipped)" in out.err


def test_bugs_lists_every_entry(cli):
    proc = cli("bugs")
    assert proc.returncode == 0, proc.stderr
    for b in bugs.BUGS:
        assert re.search(rf"^{re.escape(b.id)}\s+{b.expect}\s+{b.verdict}\s", proc.stdout, re.M), b.id
    assert "https://github.com/apache/tvm/issues/20909" in proc.stdout


def test_bugs_unknown_id_is_one_line_exit_2(cli_here):
    proc = cli_here("bugs", "--check", "--id", "tvm-00000")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "unknown bug id 'tvm-00000'" in proc.stderr
    assert "Traceback" not in proc.stderr


# One entry of each kind: a catalog seed reproduced, one fixed upstream, an error, a program (a near miss)
# and a module case of the zoo (skipped without transformers). Every entry, with its scripts, is checked by
# `make bugs` and by the workflow's zoo job (`normdiff bugs --check`): here a sample keeps `make test` short,
# and the scripts run for one entry only (test_bugs_check_runs_an_entrys_full_and_short_script).
SAMPLE = ("tvm-20909", "tvm-19592", "tvm-new-bf16-layer-norm", "executorch-24428-near-miss", "onnxruntime-22557-silu-gate")


@pytest.mark.slow
def test_bugs_check_behaves_as_recorded_on_one_entry_of_each_kind(cli, tmp_path):
    proc = cli("bugs", "--check", "--no-scripts", "--jobs", "2", "--out", str(tmp_path),
               *[a for i in SAMPLE for a in ("--id", i)])
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    from harness.commands.bugs import missing

    sample = [bugs.get(i) for i in SAMPLE]
    checked = [b for b in sample if not missing(b)]
    for b in sample:
        state = rf"{b.expect}\s+\(as recorded\)" if b in checked else r"skipped\s+\(needs "
        assert re.search(rf"^{re.escape(b.id)}\s+{state}", proc.stdout, re.M), proc.stdout
    assert f"all {len(checked)} catalog entries checked behave as recorded" in proc.stderr
    records = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    seed = bugs.get("tvm-20909").specs[0]
    rec = next(r for r in records if r["case_id"] == seed.case_id and r["path"] == "tvm-decompose")
    assert rec["verdict"] == "inaccurate" and rec["max_abs_err"] == pytest.approx(0.4141, abs=1e-3)


@pytest.mark.slow
def test_bugs_check_runs_an_entrys_full_and_short_script(cli, tmp_path):
    """Both scripts of the seed, in one fresh interpreter: each exits 1, as the entry is recorded, and they stay
    in --out's scripts/ beside their output."""
    proc = cli("bugs", "--check", "--jobs", "1", "--id", "tvm-20909", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert re.search(r"^tvm-20909\s+reproduced\s+\(as recorded\)\s+scripts: full exits 1, short exits 1$",
                     proc.stdout, re.M), proc.stdout
    assert "and so do their full and short scripts" in proc.stderr
    scripts = tmp_path / "scripts"
    assert sorted(os.listdir(scripts)) == ["tvm-20909-full.py", "tvm-20909-full.py.out", "tvm-20909-short.py",
                                           "tvm-20909-short.py.out"]
    assert "FAIL: rows beyond normdiff's check" in (scripts / "tvm-20909-full.py.out").read_text()
    assert "rows failing: 1 of 1" in (scripts / "tvm-20909-short.py.out").read_text()


def test_an_entry_whose_scripts_do_not_exit_as_recorded_is_said_and_counts():
    from harness.commands.bugs import _scripts_note

    assert _scripts_note((1, 1, 1)) == ("scripts: full exits 1, short exits 1", True)
    assert _scripts_note((0, 1, 1)) == ("scripts: full exits 0, short exits 1 (recorded: 1)", False)
    assert _scripts_note(None)[1] is False


def test_a_symbolic_entry_holds_each_check_to_its_scope(monkeypatch):
    """An entry of symbolic cases says "symbolic only" or "also static"; a check whose static control says the
    other is a change, however it was reproduced."""
    from cases.bug import entry

    monkeypatch.setenv(paths.ENV, "")
    paths.register("size-hint", "tests.plugin_paths:SizeHintPath")
    raw = {"pattern": "rms_norm", "style": "qwen", "dtype": "float32", "shape": [4, 64], "dynamic": [0],
           "params": {"kind": "normal"}}
    with pytest.raises(AssertionError, match="has a scope"):
        entry("pytorch-new-x", None, "t", [raw], ["size-hint"], Verdict.INACCURATE, "reproduced", "n")
    from harness.engine.execute import Executor

    executor = Executor()
    executor.execute(raw, "size-hint")  # compiled at 4 rows: its size hint
    spec = CaseSpec.from_dict({**raw, "shape": [7, 64]})
    records = {(spec.case_id, "size-hint"): executor.execute(spec, "size-hint")}
    for scope, state in (("symbolic only", "reproduced"), ("also static", "changed")):
        bug = entry("pytorch-new-x", None, "t", [spec.to_dict()], ["size-hint"], Verdict.INACCURATE, "reproduced",
                    "n", scope=scope)
        assert status(bug, records)[0] == state
