"""`normdiff run` and `merge` as users meet them: runs that cannot lose each other's results (the folder
lock, --resume across versions, bounded workers), and what they write where, with which modes.

A run writes into its --out folder (its run history included) and the
artifact cache, nothing into the folder it was started from; every file it
writes is readable as the umask allows, atomic replacement or not.
"""
import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from collections import Counter

import pytest

from harness.core.records import read_results
from harness.engine.lock import folder_lock
from harness.spec import CaseSpec, load_spec_file
from helpers import ROOT, seed

SEED = seed("tvm-20909.json")
HOG_ENV = {"NORMDIFF_EXTRA_PATHS": "hog=tests.crashy_paths:HogPath", "PYTHONPATH": ROOT}
EAGER_ROW = '<tr data-path="eager"><td>eager</td><td>{0}</td><td>{0}</td><td>100.0%</td>'


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-2000:]
    return lines[0]


def test_a_busy_folder_is_refused_before_anything_is_touched(cli, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text('{"kept": true}\n')
    with folder_lock(str(out)):  # this process is "the other run"
        r = cli("run", "--case", SEED, "--paths", "eager", "--out", str(out), "--jobs", "0", "--no-history")
        assert r.returncode == 2
        line = one_line(r.stderr)
        assert str(out) in line and f"pid {os.getpid()}" in line
        m = cli("merge", str(out), "--out", str(out), "--no-history")
        assert m.returncode == 2 and f"pid {os.getpid()}" in one_line(m.stderr)
    assert (out / "results.jsonl").read_text() == '{"kept": true}\n'
    assert not (out / "summary.md").exists()
    # once the holder is gone the folder is free again
    assert cli("run", "--case", SEED, "--paths", "eager", "--out", str(out), "--jobs", "0",
               "--no-history").returncode == 0


@pytest.mark.slow
def test_two_concurrent_runs_into_one_folder_keep_the_first_runs_records_whole(cli, cli_here, tmp_path):
    """The smoke suite on eager and tvm (60 executions when written); the second run exits 2 naming the first's pid."""
    out = tmp_path / "out"
    history = tmp_path / "history.sqlite"
    args = ["run", "--suite", "smoke", "--paths", "eager,tvm", "--out", str(out), "--quiet", "--history", str(history)]
    # --no-cache: the first run compiles every TVM case, so it is surely still writing when the second starts
    first = subprocess.Popen([sys.executable, "-m", "harness", *args, "--jobs", "2", "--no-cache"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 300
    while not (results.exists() and results.read_text().count("\n") >= 1):
        assert first.poll() is None, first.communicate()[1][-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)
    second = cli(*args, "--jobs", "1")
    assert first.poll() is None, "the first run ended before the second started: nothing was tested"
    assert second.returncode == 2, second.stderr[-2000:]
    line = one_line(second.stderr)
    assert str(out) in line and f"pid {first.pid}" in line
    _, err = first.communicate(timeout=900)
    assert first.returncode in (0, 1), err[-2000:]
    lines = results.read_text().splitlines()
    records = [json.loads(x) for x in lines]  # every line whole
    cases = [json.loads(x) for x in cli_here("cases", "--suite", "smoke").stdout.splitlines()]
    wanted = {(CaseSpec.from_dict(c).case_id, p) for c in cases for p in ("eager", "tvm")}
    assert len(wanted) == 2 * len(cases) >= 60
    assert Counter((r["case_id"], r["path"]) for r in records) == Counter(wanted)
    assert f"{len(wanted)} executions" in err
    # only the first run reached the history
    import sqlite3
    with sqlite3.connect(str(history)) as con:
        assert con.execute("SELECT COUNT(*), SUM(executions) FROM runs").fetchone() == (1, len(wanted))


def test_resume_refuses_records_of_other_library_versions(cli, cli_here, tmp_path):
    out = tmp_path / "out"
    assert cli("run", "--case", SEED, "--paths", "eager", "--out", str(out), "--jobs", "0",
               "--no-history").returncode == 0
    results = out / "results.jsonl"
    (rec,) = read_results(str(results))
    rec["versions"]["torch"] = "2.0.0"
    results.write_text(json.dumps(rec) + "\n")
    before = results.read_text()
    r = cli_here("run", "--case", SEED, "--paths", "eager,tvm", "--out", str(out), "--jobs", "0", "--resume",
                 "--no-history")
    assert r.returncode == 2
    line = one_line(r.stderr)
    assert "--resume" in line and "torch 2.0.0" in line and str(results) in line
    assert results.read_text() == before


@pytest.mark.parametrize("args, words", [
    (["--max-memory", "0"], "--max-memory"),
    (["--max-memory", "-3"], "--max-memory"),
    (["--max-memory", "lots"], "--max-memory"),
])
def test_bad_max_memory_is_one_line_and_exit_2(cli_here, args, words):
    r = cli_here("run", "--case", SEED, "--paths", "eager", *args)
    assert r.returncode == 2 and words in one_line(r.stderr)


def test_a_worker_past_max_memory_is_one_error_record_and_the_run_goes_on(tmp_path):
    """tests.crashy_paths.HogPath asks for 6 GB on its trigger input; under --max-memory 4 that is refused."""
    specs = [{"pattern": "layer_norm", "dtype": "float32", "shape": [2, 16]},
             {"pattern": "layer_norm", "dtype": "float32", "shape": [2, 16],
              "input": {"kind": "constant", "value": 7.0}},  # tests.crashy_paths.TRIGGER
             {"pattern": "rms_norm", "dtype": "float16", "shape": [2, 16]}]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps(s) + "\n" for s in specs))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "harness", "run", "--case", str(cases), "--paths", "eager,hog",
                        "--max-memory", "4", "--out", str(out), "--jobs", "2", "--quiet", "--no-history"],
                       cwd=ROOT, env=dict(os.environ, **HOG_ENV), capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stderr[-2000:]
    records = {(x["case_id"], x["path"]): x for x in read_results(str(out / "results.jsonl"))}
    assert len(records) == 6
    trigger = CaseSpec.from_dict(specs[1]).case_id
    hog = records.pop((trigger, "hog"))
    assert hog["verdict"] in ("error", "crash")
    assert "memory limit of 4 GB" in hog["message"] and "--max-memory" in hog["message"]
    assert all(x["verdict"] == "pass" for x in records.values())  # eager everywhere, hog elsewhere
    for s in (specs[0], specs[2]):
        cid = CaseSpec.from_dict(s).case_id
        assert records[(cid, "hog")]["max_abs_err"] == records[(cid, "eager")]["max_abs_err"]


def runs_in(db) -> list[tuple[str, int]]:
    with sqlite3.connect(str(db)) as con:
        return con.execute("SELECT kind, executions FROM runs ORDER BY run_id").fetchall()


def pass_rates(report) -> str:
    return report.read_text().split('<table id="pass-rates">', 1)[1].split("</table>", 1)[0]


def test_a_run_from_any_folder_writes_nothing_there_and_its_history_into_its_output_folder(cli, tmp_path):
    here, out, cache = tmp_path / "here", tmp_path / "elsewhere" / "out", tmp_path / "cache"
    here.mkdir()
    for n in (1, 2):
        r = cli("run", "--case", SEED, "--paths", "eager", "--jobs", "0", "--quiet", "--out", str(out),
                "--cache", str(cache), cwd=str(here))
        assert r.returncode == 0, r.stderr[-2000:]
        assert os.listdir(here) == []  # no reports/, no history, nothing
        assert runs_in(out / "history.sqlite") == [("run", 1)] * n
        # report.html's pass rates read the history this very run appended to
        assert EAGER_ROW.format(n) in pass_rates(out / "report.html")
    assert set(os.listdir(tmp_path)) <= {"cache", "elsewhere", "here"}  # the cache only when used
    r = cli("history", load_spec_file(SEED)[0].case_id, "--history", str(out / "history.sqlite"), cwd=str(here))
    assert r.returncode == 0 and "eager on " in r.stdout, r.stderr
    assert f"read the run history {out / 'history.sqlite'}" in r.stderr
    assert os.listdir(here) == []


def test_the_default_history_is_the_output_folders_and_history_file_overrides_it(cli, cli_here, tmp_path):
    common = ["--case", SEED, "--paths", "eager", "--jobs", "0", "--quiet", "--no-cache"]
    r = cli("run", *common, cwd=str(tmp_path))  # --out default: reports/latest
    assert r.returncode == 0, r.stderr[-2000:]
    latest = tmp_path / "reports" / "latest"
    assert sorted(os.listdir(tmp_path / "reports")) == ["latest"]  # not reports/history.sqlite
    assert runs_in(latest / "history.sqlite") == [("run", 1)]
    # `normdiff history` reads that default and says so
    r = cli_here("history", load_spec_file(SEED)[0].case_id, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == f"normdiff: read the run history {os.path.join('reports', 'latest', 'history.sqlite')}"
    # a merge records into its own output folder's history, or into --history FILE
    assert cli("merge", str(latest), "--out", "merged", cwd=str(tmp_path)).returncode == 0
    assert runs_in(tmp_path / "merged" / "history.sqlite") == [("merge", 1)]
    assert cli("merge", str(latest), "--out", "m2", "--history", "h.sqlite", cwd=str(tmp_path)).returncode == 0
    assert runs_in(tmp_path / "h.sqlite") == [("merge", 1)] and not (tmp_path / "m2" / "history.sqlite").exists()
    assert EAGER_ROW.format(1) in pass_rates(tmp_path / "m2" / "report.html")  # the history it appended to
    assert runs_in(latest / "history.sqlite") == [("run", 1)]  # (--no-history: tests/reports/test_history.py)
    # no history at the default place: one line naming the file, exit 2
    r = cli_here("history", "052c6ae297e3", cwd=str(tmp_path / "m2"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert os.path.join("reports", "latest", "history.sqlite") in r.stderr and "--out" in r.stderr


def _modes(folder) -> dict[str, int]:
    return {os.path.relpath(os.path.join(d, n), folder): stat.S_IMODE(os.stat(os.path.join(d, n)).st_mode)
            for d, _, names in os.walk(folder) for n in names}


def test_every_file_a_run_and_a_merge_write_follows_the_umask(tmp_path):
    """0644 under umask 022, as files written without atomic replacement are (mkstemp gave 0600)."""
    case = tmp_path / "case.json"  # one crash, so the reports cite a spec file under cases/ too
    case.write_text("\n".join(json.dumps({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 16],
                                          "input": i}) for i in ({"kind": "normal"}, {"kind": "constant", "value": 7.0})))
    env = dict(os.environ, NORMDIFF_EXTRA_PATHS="abort=tests.crashy_paths:AbortPath", PYTHONPATH=ROOT)
    out, merged = tmp_path / "out", tmp_path / "merged"
    for argv in (["run", "--case", str(case), "--paths", "eager,abort", "--jobs", "1", "--quiet", "--no-cache",
                  "--out", str(out)],
                 ["merge", str(out), "--out", str(merged)]):
        r = subprocess.run([sys.executable, "-m", "harness", *argv], cwd=ROOT, env=env, umask=0o022,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode in (0, 1), r.stderr[-2000:]
    for folder in (out, merged):
        modes = _modes(folder)
        reports = {"results.jsonl", "summary.md", "junit.xml", "report.html", "history.sqlite"}
        assert reports <= set(modes) and any(p.startswith("cases" + os.sep) for p in modes), sorted(modes)
        assert {p: oct(m) for p, m in modes.items() if m != 0o644} == {}


def test_a_run_given_the_baseline_attributes_only_the_failures_it_does_not_expect(cli, tmp_path):
    """The seed's recompose failure is known: it is not attributed again; the no-dim-order variant's is news."""
    from harness.attribution.policy import SKIPPED
    from helpers import SPECS, entry, write_baseline

    spec = SPECS["c"]
    (tmp_path / "case.json").write_text(spec.to_json())
    baseline = write_baseline(tmp_path, [entry("c", "executorch-recompose", "dtype_mismatch")])
    r = cli("run", "--case", str(tmp_path / "case.json"), "--paths", "executorch-recompose,executorch-recompose-no-dim-order",
            "--jobs", "0", "--quiet", "--no-cache", "--no-history", "--baseline", baseline, "--out", str(tmp_path / "o"))
    assert r.returncode == 1, r.stderr[-2000:]
    records = {rec["path"]: rec for rec in read_results(str(tmp_path / "o" / "results.jsonl"))}
    known, new = records["executorch-recompose"], records["executorch-recompose-no-dim-order"]
    assert known["verdict"] == new["verdict"] == "dtype_mismatch"
    assert known["attribution"] is None and known["first_stage_over"] is None and known["facts"]["attribution"] == SKIPPED
    assert new["attribution"] and new["first_stage_over"] and new["facts"]["attribution"] == "read"


def test_an_unreadable_baseline_for_a_run_is_one_line_and_exit_2(cli_here, tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    r = cli_here("run", "--paths", "eager", "--baseline", str(tmp_path / "bad.json"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--baseline" in one_line(r.stderr)
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_a_baseline_makes_every_failing_verdict_it_expects_known_to_the_policy(tmp_path):
    """Not only the attributed ones: a symbolic `error` the baseline expects gets no static control (a static
    compile of each failing size, every night), as a known wrong output gets no attribution."""
    import argparse

    from harness.commands.run import policy_arg
    from harness.spec import CaseSpec

    specs = [CaseSpec.from_dict({"pattern": "layer_norm", "dtype": d, "shape": [2, 8]})
             for d in ("float16", "bfloat16")]
    entries = [{"case_id": s.case_id, "path": "tvm", "verdict": v, "upstream": "new", "reason": "r",
                "case": s.to_dict()} for s, v in zip(specs, ("error", "inaccurate"))]
    files = []
    for k, entry in enumerate(entries):  # one baseline each, as `make nightly` gives one a suite
        files.append(str(tmp_path / f"baseline-{k}.json"))
        with open(files[-1], "w") as fh:
            json.dump({"format": "normdiff-baseline", "version": 1, "entries": [entry]}, fh)
    policy = policy_arg(argparse.Namespace(attribute=False, baseline=files))
    assert policy.known == {(specs[0].case_id, "tvm"): {"error"}, (specs[1].case_id, "tvm"): {"inaccurate"}}
    assert not policy.every and policy_arg(argparse.Namespace(attribute=True, baseline=files)).every
