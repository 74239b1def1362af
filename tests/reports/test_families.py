"""Reports by bug family: one row (or JUnit suite) per upstream report or triage reason, simplest case first."""
import json
import os
import re
import xml.etree.ElementTree as ET

from harness.reports import baseline as gate
from harness.reports.families import elements, families, family_slug
from harness.reports.known import Known
from harness.reports.plots import CLIP_HIGH, CLIP_LOW, err_bound_points
from harness.reports.write import write_reports
from helpers import SPECS, entry, record

TVM_20909 = "apache/tvm#20909"


def night():
    """Two tvm-decompose layer_norm failures triage calls #20909 (not in the baseline), one known
    failure with its own reason, one failure no rule knows, and passes."""
    records = [record("a", "tvm-decompose", "inaccurate"), record("b", "tvm-decompose", "inaccurate"),
               record("c", "executorch-recompose", "dtype_mismatch"),
               record("e", "executorch", "shape_mismatch", "odd shape"),
               record("a", "eager", "pass"), record("b", "eager", "pass")]
    for r, ratio in zip(records, (209.0, 3e7, None, 5.0, 0.2, 0.0)):
        r["max_err_over_tol"] = ratio
    baseline = gate.parse_baseline(json.dumps({"format": "normdiff-baseline", "version": 1, "entries": [
        entry("c", "executorch-recompose", "dtype_mismatch", "pytorch/executorch#24428", "float32 out")]}))
    return records, baseline


def test_failures_group_by_baseline_entry_then_triage_rule_then_untriaged():
    records, baseline = night()
    groups = families(records, Known(baseline))
    by_label = {f.label.split(":")[0]: f for f in groups}
    assert sorted(by_label) == sorted([TVM_20909, "pytorch/executorch#24428", "untriaged"])
    tvm = by_label[TVM_20909]
    assert len(tvm.records) == 2 and tvm.paths == ["tvm-decompose"] and tvm.dtypes == ["float16"]
    assert tvm.simplest["case_id"] == SPECS["a"].case_id  # 128 elements, not the seed's 4096
    assert elements(tvm.simplest["case"]) == 128 and tvm.worst_ratio == 3e7
    assert by_label["pytorch/executorch#24428"].label == "pytorch/executorch#24428: float32 out"
    assert by_label["untriaged"].label == "untriaged: shape_mismatch"
    # families with a failure new to the baseline come first; the known one last
    assert groups[-1].upstream == "pytorch/executorch#24428"


def test_summary_junit_and_html_show_one_row_per_family(tmp_path):
    records, baseline = night()
    out = str(tmp_path / "out")
    write_reports(records, out, baseline=baseline)
    simplest = os.path.join(out, "cases", f"{SPECS['a'].case_id}.json")
    assert json.load(open(simplest)) == SPECS["a"].to_dict()  # the repro command's file exists

    summary = open(os.path.join(out, "summary.md")).read()
    section = summary.split("## Failures by family (3 families)", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| executions")]
    assert len(rows) == 3
    (tvm,) = [row for row in rows if TVM_20909 in row]
    assert tvm.startswith("| 2 |") and "tvm-decompose" in tvm and "(128 elements)" in tvm
    assert f"`normdiff repro {simplest} --path tvm-decompose`" in tvm

    root = ET.parse(os.path.join(out, "junit.xml")).getroot()
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert len(suites) == 4 and "passing" in suites
    (fam,) = [s for n, s in suites.items() if n.startswith(f"family: {TVM_20909}")]
    assert fam.get("tests") == "2" and fam.get("failures") == "2"
    known = suites["family: pytorch/executorch#24428: float32 out"]
    assert known.get("skipped") == "1" and known.find("testcase/skipped").get("type") == "xfail"
    assert suites["passing"].get("tests") == "2"
    assert root.get("tests") == str(len(records)) == str(sum(int(s.get("tests")) for s in suites.values()))
    family_props = {p.get("value") for p in root.iter("property") if p.get("name") == "family"}
    assert len(family_props) == 3

    page = open(os.path.join(out, "report.html")).read()
    table = page.split('<table id="families">', 1)[1].split("</table>", 1)[0]
    slugs = re.findall(r'<tr data-family="(f-[0-9a-f]{8})">', table)
    assert len(slugs) == 3 and len(set(slugs)) == 3
    assert f'href="#family={family_slug(fam.get("name")[len("family: "):])}"' in table
    failing = page.split('<table id="failures"', 1)[1].split("</table>", 1)[0]
    assert failing.count("<tr data-path=") == 4  # every failing execution, each tagged with its family
    assert set(re.findall(r'data-family="(f-[0-9a-f]{8})"', failing)) == set(slugs)


def test_err_bound_points_clip_and_say_what_has_no_output():
    records, _ = night()
    records.append(record("d", "tvm", "error", "power only applies to float"))
    records.append({**record("f", "tvm", "nonfinite"), "max_err_over_tol": None})
    points, unmeasured = err_bound_points(records)
    ys = {(p, v): y for p, v, y, _ in points}
    assert ys[("tvm-decompose", "inaccurate")] in (209.0, CLIP_HIGH)
    assert max(y for *_, y, _ in points) == CLIP_HIGH and min(y for *_, y, _ in points) == CLIP_LOW
    assert ("tvm", "nonfinite") in ys and ys[("tvm", "nonfinite")] == CLIP_HIGH  # drawn at the top
    assert {m for *_, m in points} == {"o", "^", "v"}  # 3e7 above, 0.0 below the clip
    assert unmeasured == {"executorch-recompose": 1, "tvm": 1}  # no ratio: dtype_mismatch here, an error


def test_symbolic_failures_say_symbolic_only_or_also_static_by_their_static_control(tmp_path):
    """A family of symbolic failures says its scope (counted when both occur); each failing row its own; a
    family of static failures says nothing new."""
    records, baseline = night()
    control = {"verdict": "pass", "max_abs_err": 1e-3, "max_err_over_tol": 0.5, "message": "max abs err 0.001"}
    records[0]["static_control"] = control
    records[1]["static_control"] = {**control, "verdict": "inaccurate", "max_err_over_tol": 7.0}
    groups = {f.label.split(":")[0]: f for f in families(records, Known(baseline))}
    assert groups[TVM_20909].scope == "1 also static, 1 symbolic only"
    assert groups["untriaged"].scope == "" and groups["untriaged"].shown == groups["untriaged"].label
    records[1]["static_control"]["verdict"] = "pass"
    assert families(records, Known(baseline))[0].shown.endswith(" [symbolic only]")
    out = str(tmp_path / "out")
    write_reports(records, out, baseline=baseline)
    summary = open(os.path.join(out, "summary.md")).read()
    assert summary.count("[symbolic only]") == 1 and "| inaccurate (symbolic only) |" in summary
    assert "- compiled statically at this size (symbolic only): pass, 0.5x the bound" in summary
    page = open(os.path.join(out, "report.html")).read()
    assert "[symbolic only]" in page and "<td>inaccurate (symbolic only)</td>" in page
