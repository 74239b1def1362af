"""A catalog entry's two scripts (harness/repro/entry_scripts.py): what `bugs --check` runs for it."""
from __future__ import annotations

import ast
import os

from cases import bugs
from harness.repro.entry_scripts import EXITS, case, write_scripts
from harness.repro.script import render
from harness.repro.short_script import render_short


def test_an_entrys_scripts_are_repros_and_its_reports_and_must_exit_as_it_is_recorded(tmp_path):
    for bug_id in ("tvm-20909", "tvm-19592"):  # reproduced, and fixed upstream
        bug = bugs.get(bug_id)
        written = write_scripts(bug, str(tmp_path))
        spec, path = case(bug)
        assert (spec, path) == (bug.specs[0], bug.paths[0])
        assert os.path.basename(written.full) == f"{bug_id}-full.py" and os.path.basename(written.short) == f"{bug_id}-short.py"
        with open(written.full, encoding="utf-8") as fh:
            assert fh.read() == render(spec, path, bug=bug)
        with open(written.short, encoding="utf-8") as fh:
            text = fh.read()
        assert text == render_short(spec, path, bug.title)
        ast.parse(text)
        assert written.expected == EXITS[bug.expect] == (1 if bug.expect == "reproduced" else 0)
