"""`normdiff run --per-suite`: several suites as one run (`make nightly`), each written into its own folder as if
it had run alone, so each suite's gate, reports and history read what they always read."""
import json
import sqlite3

from harness.core.records import read_results
from harness.spec import CaseSpec
from cases.suites import suite


def test_two_suites_run_once_and_each_folder_holds_its_own_cases_a_shared_one_in_both(cli, tmp_path):
    out = tmp_path / "night"
    r = cli("run", "--per-suite", "--suite", "smoke", "--suite", "nearmiss", "--paths", "eager", "--jobs", "0",
            "--quiet", "--out", str(out), "--history", str(tmp_path / "h.sqlite"))
    assert r.returncode in (0, 1), r.stderr
    assert f"reports in {out / 'smoke'}, {out / 'nearmiss'}" in r.stderr
    every = read_results(str(out / "results.jsonl"))
    each = {}
    for name in ("smoke", "nearmiss"):
        ids = {s.case_id for s in suite(name)}
        records = read_results(str(out / name / "results.jsonl"))
        assert {x["case_id"] for x in records} == ids and len(records) == len(ids)  # eager: one a case
        assert [(x["case_id"], x["path"]) for x in records] == sorted((x["case_id"], x["path"]) for x in records)
        for report in ("summary.md", "junit.xml", "report.html"):
            assert (out / name / report).is_file()
        each[name] = ids
    shared = each["smoke"] & each["nearmiss"]
    assert shared  # the two suites share cases: each ran once, and each folder has it
    assert len(every) == len(each["smoke"] | each["nearmiss"])
    with sqlite3.connect(tmp_path / "h.sqlite") as db:  # one history entry a suite, as two runs would append
        dirs = sorted(row[0] for row in db.execute("select out_dir from runs"))
    assert dirs == sorted([str(out / "nearmiss"), str(out / "smoke")])


def test_per_suite_without_suites_or_with_case_files_is_one_line_and_exit_2(cli, tmp_path):
    spec = tmp_path / "one.json"
    spec.write_text(json.dumps(CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [2, 8]}).to_dict()))
    for args, said in ((["--case", str(spec)], "--per-suite: needs --suite"),
                       (["--suite", "smoke", "--suite", "smoke"], "--suite: smoke named twice"),
                       (["--suite", "nope"], "--suite:")):
        r = cli("run", "--per-suite", *args, "--paths", "eager", "--out", str(tmp_path / "o"))
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and said in lines[0], r.stderr
    assert not (tmp_path / "o" / "results.jsonl").exists()
