"""The run history: runs appended to SQLite, `normdiff history`, pass rates, concurrent writers."""
import json
import os
import sqlite3
import subprocess
import sys

import pytest

from harness.core.records import read_results
from harness.spec import load_spec_file
from harness.reports import history
from helpers import ROOT, SPECS, record, seed

SEED = seed("tvm-20909.json")


def versioned(name, path, verdict, torch):
    r = record(name, path, verdict)
    r["versions"] = {"torch": torch, "numpy": "2.1.0"}
    r["max_err_over_tol"] = 0.5 if verdict == "pass" else 209.0
    return r


def three_nights(db):
    """b on tvm-decompose passes under torch 2.12, fails under 2.13 twice; a passes throughout."""
    for torch, verdict in (("2.12.0", "pass"), ("2.13.0", "inaccurate"), ("2.13.0", "inaccurate")):
        history.append(db, [versioned("b", "tvm-decompose", verdict, torch), versioned("a", "eager", "pass", torch)],
                       kind="run", out_dir="nightly")


def hist(capsys, *args):
    from harness.commands.main import main

    code = main(["history", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_first_failed_and_last_passed_with_the_versions_of_each_run(capsys, tmp_path):
    db = str(tmp_path / "h.sqlite")
    three_nights(db)
    code, out, err = hist(capsys, SPECS["b"].case_id, "--history", db)
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if x.strip().startswith("tvm-decompose on ")]
    assert "inaccurate in run 3" in line and "failed in 2 of 3 runs" in line
    assert "first failed: run 2" in line and "last passed: run 1" in line and "failing since run 2" in line
    runs = out.split("runs:", 1)[1]
    assert "run 1:" in runs and "torch 2.12.0" in runs.split("run 2:")[0]
    assert "run 2:" in runs and "torch 2.13.0" in runs.split("run 2:")[1]
    # a unique prefix of the case_id works too
    assert hist(capsys, SPECS["b"].case_id[:6], "--history", db)[1] == out


def test_a_family_by_its_upstream_report_or_words_of_its_reason(capsys, tmp_path):
    db = str(tmp_path / "h.sqlite")
    three_nights(db)
    for target in ("apache/tvm#20909", "reduction buffers"):  # cases/triage.py's rule for this failure
        code, out, err = hist(capsys, target, "--history", db, "--export", str(tmp_path / "f.json"))
        assert code == 0, err
        assert out.startswith(f"family {target!r}: 1 executions") and "apache/tvm#20909: " in out
        assert "first failed: run 2" in out and "last passed: run 1" in out  # its passes are there too
    data = json.loads((tmp_path / "f.json").read_text())
    (ex,) = data["executions"]
    assert [r["verdict"] for r in ex["runs"]] == ["pass", "inaccurate", "inaccurate"]
    assert data["runs"]["1"]["versions"]["torch"] == "2.12.0"


@pytest.mark.parametrize("target, words", [("nosuch words", "no recorded execution"), ("", "give a case_id")])
def test_nothing_matching_is_one_line_and_exit_2(cli_here, tmp_path, target, words):
    db = str(tmp_path / "h.sqlite")
    three_nights(db)
    r = cli_here("history", target, "--history", db)
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_an_ambiguous_prefix_and_a_bad_file_are_one_line_and_exit_2(cli_here, tmp_path):
    db = str(tmp_path / "h.sqlite")
    twins = [dict(record("a", "eager", "pass"), case_id=cid) for cid in ("abcd11111111", "abcd22222222")]
    history.append(db, twins, kind="run", out_dir="x")
    r = cli_here("history", "abcd", "--history", db)
    assert r.returncode == 2 and "start of 2 case ids" in r.stderr and "give more digits" in r.stderr
    assert cli_here("history", "abcd2", "--history", db).returncode == 0
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    for path, words in ((str(tmp_path / "junk.sqlite"), "not a normdiff history"),
                        (str(tmp_path / "none.sqlite"), "no run history")):
        r = cli_here("history", "abcd1", "--history", path)
        assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_pass_rates_per_path_over_the_runs(tmp_path):
    db = str(tmp_path / "h.sqlite")
    assert history.pass_rates(db) is None
    three_nights(db)
    rates = history.pass_rates(db)
    assert [(run, passed, total) for run, _, passed, total in rates["tvm-decompose"]] == [(1, 1, 1), (2, 0, 1),
                                                                                        (3, 0, 1)]
    assert [passed for _, _, passed, _ in rates["eager"]] == [1, 1, 1]


WRITER = """
import sys
from harness.reports import history
from helpers import SPECS, record
records = [dict(record(n, p, v), max_err_over_tol=1.0) for n in SPECS for p in ("eager", "tvm", "executorch")
           for v in ("pass",)] * 20
for i in range(int(sys.argv[2])):
    history.append(sys.argv[1], records, kind="run", out_dir="w" + sys.argv[3])
"""


def test_two_processes_appending_at_once_lose_nothing(tmp_path):
    db = str(tmp_path / "h.sqlite")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]))
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, db, "15", str(k)], cwd=ROOT, env=env,
                              stderr=subprocess.PIPE, text=True) for k in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        runs, executions = con.execute("SELECT COUNT(*), SUM(executions) FROM runs").fetchone()
        assert runs == 30 and executions == 30 * 360
        assert con.execute("SELECT COUNT(*) FROM executions").fetchone() == (30 * 360,)
        # each run's rows came in one transaction: never interleaved with the other writer's
        per_run = con.execute("SELECT run_id, COUNT(*) FROM executions GROUP BY run_id").fetchall()
        assert {n for _, n in per_run} == {360}


def test_run_into_a_folder_named_as_history_is_refused(cli_here, tmp_path):
    r = cli_here("run", "--case", SEED, "--paths", "eager", "--history", str(tmp_path), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--history" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_history_answers_for_the_seed_after_two_runs_and_the_report_shows_pass_rates(cli, cli_here, tmp_path):
    db = str(tmp_path / "history.sqlite")
    out = tmp_path / "out"
    for _ in range(2):
        r = cli("run", "--case", SEED, "--paths", "eager,tvm-decompose", "--out", str(out), "--jobs", "1",
                "--quiet", "--history", db)
        assert r.returncode == 1, r.stderr[-2000:]  # the seed fails on tvm-decompose
    seed_id = load_spec_file(SEED)[0].case_id
    r = cli_here("history", seed_id, "--history", db)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"case {seed_id}: 2 executions")
    (tvm,) = [x for x in lines if x.strip().startswith("tvm-decompose on ")]
    assert "failed in 2 of 2 runs" in tvm and "first failed: run 1" in tvm and "last passed: never" in tvm
    (eager,) = [x for x in lines if x.strip().startswith("eager on ")]
    assert "first failed: never" in eager and "last passed: run 2" in eager
    torch_version = read_results(str(out / "results.jsonl"))[0]["versions"]["torch"]
    assert f"torch {torch_version}" in r.stdout.split("runs:", 1)[1]
    fam = cli_here("history", "apache/tvm#20909", "--history", db)
    assert fam.returncode == 0 and "1 executions" in fam.stdout.splitlines()[0]
    page = (out / "report.html").read_text()
    rates = page.split('<table id="pass-rates">', 1)[1].split("</table>", 1)[0]
    assert '<tr data-path="eager"><td>eager</td><td>2</td><td>2</td><td>100.0%</td>' in rates
    assert '<tr data-path="tvm-decompose"><td>tvm-decompose</td><td>2</td><td>2</td><td>0.0%</td>' in rates
    # merge appends too (as a merge), and --no-history leaves the file alone
    assert cli("merge", str(out), "--out", str(tmp_path / "merged"), "--history", db).returncode == 0
    assert cli("merge", str(out), "--out", str(tmp_path / "merged2"), "--no-history", "--history", db).returncode == 0
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT kind, executions FROM runs ORDER BY run_id").fetchall() == [
            ("run", 2), ("run", 2), ("merge", 2)]
