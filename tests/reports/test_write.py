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


def _several(name, path, scores):
    """A record of several outputs as the runner writes it: each output's score in `outputs`, the worst one's flat
    (docs/contracts.md §4). `scores` is [(output name, verdict, max_err_over_tol)] in order."""
    rec = record(name, path, "pass")
    outputs = [{"name": n, "verdict": v, "message": f"{v}, {ratio}x", "max_abs_err": ratio / 100, "max_rel_err": None,
                "max_ulp": ratio * 4, "worst_row": 0, "out_dtype": rec["out_dtype"], "max_err_over_tol": ratio,
                "unstable": False, "rows_over": int(ratio > 1)} for n, v, ratio in scores]
    worst = max(outputs, key=lambda o: (o["verdict"] != "pass", o["max_err_over_tol"]))
    return {**rec, "verdict": worst["verdict"], "message": f"output {worst['name']}: {worst['message']}",
            "max_err_over_tol": worst["max_err_over_tol"], "max_ulp": worst["max_ulp"],
            "outputs": outputs, "verdict_output": worst["name"]}


def test_each_output_of_a_case_of_several_has_its_score_in_every_report(tmp_path):
    """A program's `return normed, h` and a gradient case's d_x, d_weight, d_bias: summary.md, junit.xml and
    report.html give each output its verdict and error over its bound; one-output records read as before."""
    records, baseline = hand_made()
    two = _several("c", "tvm", [("normed", "inaccurate", 250.0), ("h", "pass", 0.25)])
    three = _several("a", "inductor", [("d_x", "pass", 0.5), ("d_weight", "inaccurate", 12.0), ("d_bias", "pass", 0.0)])
    out = str(tmp_path / "out")
    write_reports(records + [two, three], out, baseline=baseline)
    texts = {"normed": "normed: inaccurate, 250x the bound", "h": "h: pass, 0.25x the bound",
             "d_x": "d_x: pass, 0.5x the bound", "d_weight": "d_weight: inaccurate, 12x the bound",
             "d_bias": "d_bias: pass, 0x the bound"}

    summary = open(os.path.join(out, "summary.md"), encoding="utf-8").read()
    assert "- output normed: inaccurate, max abs err 2.5 (1000 ulp), 250x the bound" in summary
    assert "- output h: pass, max abs err 0.0025 (1 ulp), 0.25x the bound" in summary
    assert "- output d_bias: pass, max abs err 0 (0 ulp), 0x the bound" in summary
    table = summary.split("## All failing executions", 1)[1]
    (row,) = [line for line in table.splitlines() if "| inductor |" in line]
    assert f"| 12 ({texts['d_x']}; {texts['d_weight']}; {texts['d_bias']}) |" in row
    (row,) = [line for line in table.splitlines() if f"| executorch | {gate.case_label(SPECS['c'].to_dict(), SPECS['c'].case_id)}" in line]
    assert "| 250 |" in row  # a one-output record: its error over its bound alone, as before
    assert summary.count("- output ") == 5

    suite = ET.parse(os.path.join(out, "junit.xml")).getroot()
    props = {(tc.get("classname"), tc.find("properties/property[@name='case_id']").get("value")):
             {p.get("name"): p.get("value") for p in tc.iter("property")} for tc in suite.iter("testcase")}
    gradient = props[("normdiff.inductor", SPECS["a"].case_id)]
    assert {k: v for k, v in gradient.items() if k.startswith("output ")} == {
        "output d_x": "pass, 0.5x the bound", "output d_weight": "inaccurate, 12x the bound",
        "output d_bias": "pass, 0x the bound"}
    assert gradient["verdict_output"] == "d_weight"
    assert props[("normdiff.tvm", SPECS["c"].case_id)]["output normed"] == "inaccurate, 250x the bound"
    (failure,) = [tc.find("failure") for tc in suite.iter("testcase") if tc.get("classname") == "normdiff.inductor"
                  and tc.find("failure") is not None]
    assert all(f"output {t}\n" in failure.text for k, t in texts.items() if k.startswith("d_"))
    one = [tc for tc in suite.iter("testcase") if tc.get("classname") == "normdiff.executorch"]
    assert one and not any(p.get("name").startswith(("output ", "verdict_output")) for tc in one
                           for p in tc.iter("property"))

    page = open(os.path.join(out, "report.html"), encoding="utf-8").read()
    _, visible = parse_html(page)
    for text in texts.values():
        assert f'<span class="output">{text}</span>' in page and text in visible
    assert page.count(f'<span class="output">{texts["d_weight"]}</span>') == 2  # the worst cases and the failures
    rows = [line for line in page.splitlines() if line.startswith("<tr data-path=\"inductor\"")]
    assert len(rows) == 1 and 'data-sort="12.0"' in rows[0]  # sorted by the worst output's
