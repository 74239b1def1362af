"""summary.md and report.html name, per failure family, the first stage over its bound."""
from helpers import record

from harness.attribution.describe import family_stage_text, first_stage_text
from harness.reports.html import report_html
from harness.reports.summary import summary_markdown


def _attributed(name, path, stage, dtype, ratio):
    r = record(name, path, "inaccurate")
    r["attribution"] = [
        {"stage": "return:layer_norm.mean", "op": "mean", "dtype": dtype, "max_err_over_tol": 0.0, "over": False,
         "program_dtype": "float32", "node": "lv = relax.mean", "approximate": False},
        {"stage": stage, "op": "var", "dtype": dtype, "max_err_over_tol": ratio, "over": True,
         "program_dtype": "float32", "node": "lv2 = relax.variance", "approximate": False}]
    r["first_stage_over"] = stage
    r["facts"] = {"attribution": "read"}
    return r


def test_the_first_stage_of_a_record_and_of_a_family():
    r = _attributed("b", "tvm-decompose", "return:layer_norm.variance", "float16", 32513.5)
    assert first_stage_text(r) == "return:layer_norm.variance (float16, 3.25e+04x its bound)"
    other = _attributed("a", "tvm-decompose", "return:layer_norm.variance", "float16", 40.0)
    unavailable = record("a", "executorch", "inaccurate")
    unavailable["facts"] = {"attribution": "unavailable: path 'executorch' does not expose its intermediates"}
    assert first_stage_text(unavailable).startswith("unavailable: path 'executorch'")
    assert family_stage_text([r, other, unavailable]) == "return:layer_norm.variance (float16) ×2 (2 attributed)"
    assert family_stage_text([unavailable]) == "—"


def test_summary_and_html_show_it_per_family():
    records = [_attributed("b", "tvm-decompose", "return:layer_norm.variance", "float16", 32513.5),
               record("a", "eager", "pass")]
    md = summary_markdown(records)
    header = next(line for line in md.splitlines() if line.startswith("| executions | family"))
    assert "first stage over its bound" in header
    row = next(line for line in md.splitlines() if line.startswith("| 1 |") and "tvm-decompose" in line)
    assert "return:layer_norm.variance (float16) (1 attributed)" in row
    assert row.count("|") == header.count("|")
    assert "- first stage over its bound: return:layer_norm.variance (float16, 3.25e+04x its bound)" in md
    page = report_html(records)
    assert "<th>first stage over its bound</th>" in page
    assert "<td>return:layer_norm.variance (float16) (1 attributed)</td>" in page
