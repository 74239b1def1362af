"""`normdiff run` and `merge` as a new user meets them: what they write where, and with which modes.

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

from harness.spec import load_spec_file
from helpers import ROOT, seed

SEED = seed("tvm-20909.json")
EAGER_ROW = '<tr data-path="eager"><td>eager</td><td>{0}</td><td>{0}</td><td>100.0%</td>'


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


def test_the_default_history_is_the_output_folders_and_history_file_overrides_it(cli, tmp_path):
    common = ["--case", SEED, "--paths", "eager", "--jobs", "0", "--quiet", "--no-cache"]
    r = cli("run", *common, cwd=str(tmp_path))  # --out default: reports/latest
    assert r.returncode == 0, r.stderr[-2000:]
    latest = tmp_path / "reports" / "latest"
    assert sorted(os.listdir(tmp_path / "reports")) == ["latest"]  # not reports/history.sqlite
    assert runs_in(latest / "history.sqlite") == [("run", 1)]
    # `normdiff history` reads that default and says so
    r = cli("history", load_spec_file(SEED)[0].case_id, cwd=str(tmp_path))
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
    r = cli("history", "052c6ae297e3", cwd=str(tmp_path / "m2"))
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
