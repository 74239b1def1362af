"""The gradient catalog entries (cases/gradient_bugs.py): in the catalog, gradient cases on registered paths with
a passing control each, and one reproduced by `normdiff bugs --check` with its full and short scripts."""
from __future__ import annotations

import pytest

from cases import bugs, gradient_bugs
from harness import paths
from helpers import normdiff


def test_the_gradient_findings_are_gradient_cases_in_the_catalog_with_controls():
    assert {b.id for b in gradient_bugs.BUGS} <= set(bugs.ids())
    for b in gradient_bugs.BUGS:
        assert b.note and (b.link is None) == ("-new-" in b.id), b.id
        assert all(s.grad for s in b.specs) and all(s.grad for s, _ in b.controls), b.id
        assert set(b.paths) <= set(paths.names()) and b.controls, b.id
        assert {p for _, p in b.controls} <= set(b.paths), b.id


@pytest.mark.slow
def test_bugs_check_reproduces_eagers_float16_layer_norm_backward_with_both_scripts(tmp_path):
    """About 30 s: the entry's case and its float32 control on eager, then its two scripts."""
    done = normdiff("bugs", "--check", "--id", "pytorch-new-cpu-layer-norm-backward-half", "--jobs", "1",
                    "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reproduced  (as recorded)  scripts: full exits 1, short exits 1" in done.stdout
