"""The reports `run` writes: summary.md, junit.xml, report.html (plots embedded), spec files."""
import base64
import json
import os
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

from harness.reports import baseline as gate
from harness.reports.write import write_reports
from harness.core.records import read_results
from harness.spec import load_spec_file
from helpers import ROOT
from helpers import SPECS, entry, record, write_baseline, write_results  # noqa: F401


SEED = os.path.join(ROOT, "cases", "seeds", "tvm-20909.json")


def hand_made():
    """Records over four paths with every kind of outcome, and a baseline knowing two of them."""
    records = [record("a", p, "pass") for p in ("eager", "tvm", "tvm-decompose", "executorch")]
    records += [record("b", "eager", "pass"), record("b", "tvm", "pass"),
                record("b", "tvm-decompose", "inaccurate", "1 of 1 rows over the bound, 209x"),
                record("c", "executorch", "inaccurate", "qwen rms recomposed wrongly"),
                record("d", "tvm", "error", "power only applies to float"),
                record("e", "tvm", "pass")]
    for i, r in enumerate(records):  # a spread of errors so the ULP plot has something to show
        r["max_ulp"] = None if r["verdict"] == "error" else float(4 ** (i % 6))
        r["max_err_over_tol"] = None if r["verdict"] == "error" else (250.0 if r["verdict"] == "inaccurate" else 0.3)
    baseline = gate.parse_baseline(json.dumps({"format": "normdiff-baseline", "version": 1, "entries": [
        entry("b", "tvm-decompose", "inaccurate", "apache/tvm#20909", "float16 reduction buffers"),
        entry("e", "tvm", "nonfinite", "new", "was NaN once")]}))
    return records, baseline


class _Page(HTMLParser):
    """Every tag with its attributes, and the visible text."""

    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse_html(text):
    page = _Page()
    page.feed(text)
    return page.tags, " ".join(page.text)


def assert_self_contained(text, paths):
    tags, visible = parse_html(text)
    images = [a["src"] for t, a in tags if t == "img"]
    assert len(images) >= 3  # heatmap, err/bound distribution, worst cases
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    for tag, attrs in tags:  # nothing is fetched: no stylesheet, script file, frame or remote reference
        assert tag not in ("link", "iframe", "object", "embed")
        assert not (tag == "script" and "src" in attrs)
        for name in ("src", "href"):
            assert not attrs.get(name) or attrs[name].startswith(("data:", "#")), (tag, attrs)
    assert "url(" not in text.split("<body>")[0] and "@import" not in text
    for script in text.split("<script>")[1:]:  # the inline table script reads nothing from anywhere
        code = script.split("</script>")[0]
        assert not any(w in code for w in ("http", "fetch(", "XMLHttpRequest", "import(", "WebSocket"))
    for p in paths:
        assert p in visible, p


def test_reports_from_hand_made_records(tmp_path):
    records, baseline = hand_made()
    out = str(tmp_path / "out")
    written = write_reports(records, out, baseline=baseline)
    assert {os.path.basename(p) for p in written} >= {"summary.md", "junit.xml", "report.html"}
    ids = {name: spec.case_id for name, spec in SPECS.items()}

    html = open(os.path.join(out, "report.html"), encoding="utf-8").read()
    assert_self_contained(html, ("eager", "tvm", "tvm-decompose", "executorch"))
    assert html.count("<img") == 3 and html.startswith("<!DOCTYPE html>")
    # the worst cases with their specs, failures not in the baseline before the known one
    assert '&quot;pattern&quot;: &quot;rms_norm&quot;' in html and "apache/tvm#20909" in html
    assert html.index(f"cases/{ids['c']}.json") < html.index(f"cases/{ids['b']}.json")

    suite = ET.parse(os.path.join(out, "junit.xml")).getroot()  # the totals of every suite
    testcases = list(suite.iter("testcase"))
    assert len(testcases) == len(records) and suite.get("tests") == str(len(records))
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("2", "1", "1")
    outcome = {(tc.find("properties/property[@name='case_id']").get("value"), tc.get("classname")):
               [(ch.tag, ch.get("message") or "") for ch in tc if ch.tag != "properties"] for tc in testcases}
    assert outcome[(ids["a"], "normdiff.eager")] == []
    (known,) = outcome[(ids["b"], "normdiff.tvm-decompose")]
    assert known[0] == "skipped" and "apache/tvm#20909" in known[1] and "float16 reduction buffers" in known[1]
    (new,) = outcome[(ids["c"], "normdiff.executorch")]
    assert new[0] == "failure" and "qwen rms recomposed wrongly" in new[1]
    (crashed,) = outcome[(ids["d"], "normdiff.tvm")]
    assert crashed[0] == "error" and "power only applies to float" in crashed[1]
    (fixed,) = outcome[(ids["e"], "normdiff.tvm")]
    assert fixed[0] == "failure" and "now passes" in fixed[1]

    summary = open(os.path.join(out, "summary.md"), encoding="utf-8").read()
    assert "## Worst cases" in summary and "| tvm-decompose |" in summary
    spec_file = os.path.join(out, "cases", f"{ids['c']}.json")
    assert f"normdiff repro {spec_file} --path executorch" in summary
    assert json.dumps(SPECS["c"].to_dict()) in summary
    (spec,) = load_spec_file(spec_file)  # the repro command's file holds the very spec
    assert spec == SPECS["c"]
    assert "known (apache/tvm#20909): float16 reduction buffers" in summary
    fixed = summary.split("Known failures that now pass", 1)[1].split("##", 1)[0]
    assert ids["e"] in fixed and "was NaN once" in fixed and ids["c"] not in fixed


def test_the_same_records_give_the_same_bytes(tmp_path):
    records, baseline = hand_made()
    out = str(tmp_path / "out")
    write_reports(records, out, baseline=baseline)
    first = {n: open(os.path.join(out, n), "rb").read() for n in ("summary.md", "junit.xml", "report.html")}
    write_reports(list(reversed(records)), out, baseline=baseline)
    again = {n: open(os.path.join(out, n), "rb").read() for n in first}
    assert first == again


def test_no_records_still_writes_every_report(tmp_path):
    written = write_reports([], str(tmp_path), baseline={})
    assert len(written) == 3
    ET.parse(str(tmp_path / "junit.xml"))
    assert "0 executions" in (tmp_path / "report.html").read_text()


def test_baseline_is_read_from_reports_under_the_current_directory(tmp_path, monkeypatch):
    records, baseline = hand_made()
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "baseline.json").write_text(gate.dump_baseline(baseline))
    monkeypatch.chdir(tmp_path)
    write_reports(records, "out")
    known = 'type="xfail" message="known failure (apache/tvm#20909): float16 reduction buffers"'
    assert known in (tmp_path / "out" / "junit.xml").read_text()
    (tmp_path / "reports" / "baseline.json").write_text("{broken")  # a broken one is not fatal to a run
    write_reports(records, "out")
    junit = (tmp_path / "out" / "junit.xml").read_text()
    assert 'type="xfail"' not in junit and "known failure (apache/tvm#20909)" not in junit
    # without a baseline the triage rules still name the family
    assert '<testsuite name="family: apache/tvm#20909: DecomposeOpsForTraining' in junit


@pytest.mark.slow
def test_real_run_on_the_tvm_seed_reports_and_gates(cli, tmp_path):
    """eager + tvm-decompose on apache/tvm#20909: reports with the known failure, gate 0, then 1 without it."""
    (tmp_path / "reports").mkdir()
    seed_id = load_spec_file(SEED)[0].case_id
    base = tmp_path / "reports" / "baseline.json"
    base.write_text(json.dumps({"format": "normdiff-baseline", "version": 1, "entries": [{
        "case_id": seed_id, "path": "tvm-decompose", "verdict": "inaccurate", "upstream": "apache/tvm#20909",
        "reason": "DecomposeOpsForTraining computes float16 mean/variance",
        "case": load_spec_file(SEED)[0].to_dict()}]}))
    r = cli("run", "--case", SEED, "--paths", "eager,tvm-decompose", "--out", "nightly", "--jobs", "1",
            "--quiet", cwd=str(tmp_path))
    assert r.returncode == 1, r.stderr  # the seed fails on tvm-decompose
    out = tmp_path / "nightly"
    records = read_results(str(out / "results.jsonl"))
    assert {(x["path"], x["verdict"]) for x in records} == {("eager", "pass"), ("tvm-decompose", "inaccurate")}

    assert_self_contained((out / "report.html").read_text(), ("eager", "tvm-decompose"))
    skipped = ET.parse(str(out / "junit.xml")).getroot().find("testsuite/testcase/skipped")
    assert "apache/tvm#20909" in skipped.get("message")
    assert f"normdiff repro nightly/cases/{seed_id}.json --path tvm-decompose" in (out / "summary.md").read_text()

    ok = cli("gate", "nightly/results.jsonl", "--baseline", "reports/baseline.json", cwd=str(tmp_path))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    base.write_text(json.dumps({"format": "normdiff-baseline", "version": 1, "entries": []}))
    bad = cli("gate", "nightly/results.jsonl", "--baseline", "reports/baseline.json", cwd=str(tmp_path))
    assert bad.returncode == 1 and seed_id in bad.stderr and "NEW_FAIL tvm-decompose" in bad.stderr
