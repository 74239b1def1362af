"""junit.xml: one testcase per case × path, failing ones grouped in one testsuite per bug family.

CI reporters show suites as groups, so a family (an upstream report or a
triage reason) is a suite: twenty executions of apache/tvm#20909 read as one
group, not twenty unrelated failures. Passing executions are in the last
suite, "passing". Known failures are skipped with their report. An execution
of several outputs stays one testcase (as the gate judges it) with one
property per output: its verdict and error over its bound.
"""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter

from harness.core.records import one_line
from harness.core.verdicts import NO_OUTPUT, Status, Verdict
from harness.reports.baseline import case_label
from harness.reports.families import families
from harness.reports.known import Known, output_views, paths_of, repro_command

_TOTALS = ("tests", "failures", "errors", "skipped")


def _testcase(suite, r: dict, known: Known, out_dir: str, family: str | None, totals: Counter) -> None:
    tc = ET.SubElement(suite, "testcase", classname=f"normdiff.{r['path']}",
                       name=case_label(r["case"], r["case_id"]), time=f"{r.get('seconds') or 0.0:.3f}")
    props = ET.SubElement(tc, "properties")
    each = output_views(r)  # several outputs: one property per output, its verdict and error over its bound
    for name, value in (("case_id", r["case_id"]), ("path", r["path"]), ("verdict", r["verdict"]),
                        ("verdict_output", r.get("verdict_output") if each else None),
                        *((f"output {o.name}", o.score) for o in each),
                        ("family", family), ("spec", json.dumps(r["case"]))):
        if value is not None:
            ET.SubElement(props, "property", name=name, value=value)
    totals["tests"] += 1
    status = known.status(r)
    entry = known.entry(r)
    detail = (f"{r.get('message', '')}\n" + "".join(f"output {o.text}\n" for o in each)
              + f"spec: {json.dumps(r['case'])}\nreproduce: {repro_command(out_dir, r)}\n")
    if status == Status.XFAIL:
        ET.SubElement(tc, "skipped", type="xfail", message=f"known failure ({entry.upstream}): {entry.reason}")
        totals["skipped"] += 1
    elif status == Status.FLAKY:
        ET.SubElement(tc, "skipped", type="flaky",
                      message=f"flaky ({entry.upstream}): {entry.reason}; gave {r['verdict']}")
        totals["skipped"] += 1
    elif status == Status.FIXED:
        el = ET.SubElement(tc, "failure", type="fixed",
                           message=f"known failure now passes ({entry.upstream}); update the baseline")
        el.text = detail
        totals["failures"] += 1
    elif status == Status.NEW_FAIL:
        tag = "error" if r["verdict"] in NO_OUTPUT else "failure"
        msg = f"{r['verdict']}: {one_line(r.get('message') or '')}"
        if entry:
            msg = f"baseline expects {entry.verdict} ({entry.upstream}), got {msg}"
        el = ET.SubElement(tc, tag, type=r["verdict"], message=msg)
        el.text = detail
        totals["errors" if tag == "error" else "failures"] += 1


def _suite(root, name: str, records: list[dict], known: Known, out_dir: str, family: str | None,
           grand: Counter) -> None:
    suite = ET.SubElement(root, "testsuite", name=name)
    totals: Counter = Counter()
    for r in records:
        _testcase(suite, r, known, out_dir, family, totals)
    for k in _TOTALS:
        suite.set(k, str(totals[k]))
    suite.set("time", f"{sum(r.get('seconds') or 0.0 for r in records):.3f}")
    grand.update(totals)


def junit_xml(records: list[dict], *, out_dir: str = ".", baseline: dict | None = None) -> str:
    """Testsuites: one per family of failing executions (largest first), then "passing".

    A failure not in the baseline is a <failure> (an <error> for error, crash
    and timeout); a known failure that now passes, or fails another way, is a
    <failure> too, as the gate and strict xfail treat it. The root carries
    the totals and the library versions.
    """
    known = Known(baseline)
    rank = {p: i for i, p in enumerate(paths_of(records))}

    def order(r):
        return (rank[r["path"]], case_label(r["case"], r["case_id"]))

    root = ET.Element("testsuites", name="normdiff")
    if records:
        props = ET.SubElement(root, "properties")
        for k, v in sorted((records[0].get("versions") or {}).items()):
            ET.SubElement(props, "property", name=k, value=str(v))
    grand: Counter = Counter()
    for f in families(records, known):
        _suite(root, f"family: {f.label}", sorted(f.records, key=order), known, out_dir, f.label, grand)
    passing = sorted((r for r in records if r["verdict"] == Verdict.PASS), key=order)
    _suite(root, "passing", passing, known, out_dir, None, grand)
    for k in _TOTALS:
        root.set(k, str(grand[k]))
    root.set("time", f"{sum(r.get('seconds') or 0.0 for r in records):.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
