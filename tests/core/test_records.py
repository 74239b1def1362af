"""Result records and atomic writes: a replaced file gets the mode a plain open() would give it."""
import os
import stat
import subprocess
import sys

import pytest

from harness.core.records import write_atomic
from helpers import ROOT

WRITE = ("import sys; from harness.core.records import write_atomic; "
         "write_atomic(sys.argv[1], 'new\\n', mode=int(sys.argv[2], 8))")


def written_mode(path, umask: int, mode: int = 0o666) -> int:
    """The mode write_atomic gives `path` in a process with `umask` (the umask is process-wide)."""
    subprocess.run([sys.executable, "-c", WRITE, str(path), oct(mode)], cwd=ROOT, umask=umask, check=True,
                   env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("umask, mode, expected", [
    (0o022, 0o666, 0o644), (0o002, 0o666, 0o664), (0o077, 0o666, 0o600), (0o027, 0o666, 0o640),
    (0o022, 0o777, 0o755),  # a repro script: executable as the umask allows
], ids=lambda v: f"{v:04o}")
def test_write_atomic_gives_the_mode_less_the_umask(tmp_path, umask, mode, expected):
    target = tmp_path / "sub" / "report.html"
    assert written_mode(target, umask, mode) == expected
    assert target.read_text() == "new\n" and os.listdir(tmp_path / "sub") == ["report.html"]


def test_write_atomic_replaces_whole_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "summary.md"
    target.write_text("old\n")
    os.chmod(target, 0o600)
    assert written_mode(target, 0o022) == 0o644  # the new file's mode, as open(..., "w") of a new file
    assert target.read_text() == "new\n" and os.listdir(tmp_path) == ["summary.md"]
    (tmp_path / "blocked").mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomic(str(tmp_path / "blocked"), "x")  # a folder in the way: the error, no temporary file left
    assert sorted(os.listdir(tmp_path)) == ["blocked", "summary.md"]


# -- the typed Record -------------------------------------------------------------------------------------------

import json  # noqa: E402
import pickle  # noqa: E402
from dataclasses import replace  # noqa: E402

from harness.core.records import (BASE_KEYS, Attribution, LiftCheck, Record, ResultsWriter, OutputScore,  # noqa: E402
                                  dumps, read_results)
from harness.core.verdicts import Verdict  # noqa: E402
from harness.spec import CaseSpec  # noqa: E402

SPEC = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [2, 8]})


class Scored:
    """What harness.oracle.compare.score gives, as attributes."""
    verdict, message = Verdict.INACCURATE, "1 of 2 rows beyond"
    max_abs_err, max_rel_err, max_ulp, worst_row, max_err_over_tol = 0.5, 0.25, 12.0, 1, 3.5
    out_dtype, expected_dtype, unstable, rows_over = "float16", "float16", False, 1


def test_a_failed_record_has_every_base_key_in_order_and_nothing_else():
    r = Record.failed(SPEC, "tvm", Verdict.CRASH, versions={"torch": "x"}, cpu=None, message="worker died",
                      seconds=1.23456789, signal="SIGSEGV", log_tail=["Fatal Python error"])
    d = r.to_dict()
    assert list(d) == [*BASE_KEYS, "signal", "log_tail"]
    assert (d["verdict"], d["message"], d["seconds"], d["max_abs_err"], d["out_dtype"]) == \
        ("crash", "worker died", 1.234568, None, None)
    assert r["verdict"] == "crash" and r.get("lift_check") is None and "rounding_dtype" not in r


def test_a_scored_record_carries_its_score_flat_after_the_rounding_dtype():
    r = replace(Record.start(SPEC, "tvm", {}, None), rounding_dtype="float16")
    r = r.scored(Scored(), run_seconds=0.0123456789)
    d = r.to_dict()
    assert list(d)[-4:] == ["rounding_dtype", "max_err_over_tol", "unstable", "rows_over"]
    assert (d["max_abs_err"], d["worst_row"], d["out_dtype"], d["run_seconds"]) == (0.5, 1, "float16", 0.012346)
    assert r.score == OutputScore.of(Scored()) and "outputs" not in d


def test_several_outputs_keep_the_first_flat_and_list_every_one():
    r = Record.start(SPEC, "tvm", {}, None).scored(Scored(), run_seconds=0.0)
    two = replace(r, scores=(r.score, replace(r.score, max_abs_err=0.75, worst_row=0)))
    d = two.to_dict()
    assert d["max_abs_err"] == 0.5 and [o["max_abs_err"] for o in d["outputs"]] == [0.5, 0.75]
    assert Record.from_dict(json.loads(dumps(two))) == two


def test_a_lift_and_an_attribution_come_in_their_places_and_back():
    lift = LiftCheck("return x", "rms_norm", 0.0, 0.5, None)
    assert lift.problem(1e-3) is not None and "not trusted" in lift.problem(1e-3) and lift.problem(1.0) is None
    r = replace(Record.start(SPEC, "eager", {}, None), lift=lift, rounding_dtype="float16")
    r = replace(r.scored(Scored(), run_seconds=0.0).with_fact("attribution", "read"),
                attribution=Attribution([{"stage": "x"}], "x", "read back", 0.5), memory_limit_gb=3.0)
    d = r.to_dict()
    assert list(d)[len(BASE_KEYS):] == ["program", "lifted_pattern", "lift_check", "lift_check_over_bound",
                                        "lift_note", "rounding_dtype", "max_err_over_tol", "unstable", "rows_over",
                                        "attribution", "first_stage_over", "attribution_note",
                                        "attribution_seconds", "memory_limit_gb"]
    back = Record.from_dict(json.loads(dumps(r)))
    assert back == r and back.lift == lift and back.verdict is Verdict.INACCURATE
    assert pickle.loads(pickle.dumps(r)) == r  # what a worker sends through its pipe


def test_keys_this_version_does_not_know_are_kept(tmp_path):
    d = {**Record.start(SPEC, "eager", {}, None).to_dict(), "verdict": "pass", "from_the_future": [1, 2]}
    r = Record.from_dict(d)
    assert r.extra == {"from_the_future": [1, 2]} and r.to_dict() == d
    with ResultsWriter(str(tmp_path / "results.jsonl")) as writer:
        writer.write(r)
    assert read_results(str(tmp_path / "results.jsonl")) == [d]


def test_a_symbolic_failures_scope_is_read_from_its_static_control():
    """symbolic only: the static compile of the size passes, or refuses what the symbolic one ran to a wrong
    output; also static: it fails too; no control (a static case, a known failure): no scope."""
    from harness.core.records import static_scope

    def scoped(verdict, static):
        return static_scope({"verdict": verdict, "static_control": static and {"verdict": static}})

    assert scoped("inaccurate", "pass") == scoped("error", "pass") == "symbolic only"
    assert scoped("inaccurate", "error") == scoped("nonfinite", "unsupported") == "symbolic only"
    assert scoped("inaccurate", "inaccurate") == scoped("error", "error") == scoped("inaccurate", "nonfinite") \
        == "also static"
    assert scoped("inaccurate", None) is None
