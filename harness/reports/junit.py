"""junit.xml: one testcase per case × path; known failures skipped with their report."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter

from harness.core.records import one_line
from harness.core.verdicts import NO_OUTPUT, Status
from harness.reports.baseline import case_label
from harness.reports.known import Known, paths_of, repro_command


def junit_xml(records: list[dict], *, out_dir: str = ".", baseline: dict | None = None) -> str:
    """One testcase per case × path; known failures are skipped with their reason.

    A failure not in the baseline is a <failure> (an <error> for error, crash
    and timeout); a known failure that now passes, or fails another way, is a
    <failure> too, as the gate and strict xfail treat it.
    """
    known = Known(baseline)
    rank = {p: i for i, p in enumerate(paths_of(records))}
    records = sorted(records, key=lambda r: (rank[r["path"]], case_label(r["case"], r["case_id"])))
    suite = ET.Element("testsuite", name="normdiff")
    totals = Counter()
    if records:
        props = ET.SubElement(suite, "properties")
        for k, v in sorted((records[0].get("versions") or {}).items()):
            ET.SubElement(props, "property", name=k, value=str(v))
    for r in records:
        tc = ET.SubElement(suite, "testcase", classname=f"normdiff.{r['path']}",
                           name=case_label(r["case"], r["case_id"]), time=f"{r.get('seconds') or 0.0:.3f}")
        props = ET.SubElement(tc, "properties")
        for name, value in (("case_id", r["case_id"]), ("path", r["path"]), ("verdict", r["verdict"]),
                            ("spec", json.dumps(r["case"]))):
            ET.SubElement(props, "property", name=name, value=value)
        status = known.status(r)
        entry = known.entry(r)
        detail = (f"{r.get('message', '')}\nspec: {json.dumps(r['case'])}\n"
                  f"reproduce: {repro_command(out_dir, r)}\n")
        if status == Status.XFAIL:
            el = ET.SubElement(tc, "skipped", type="xfail", message=f"known failure ({entry.upstream}): {entry.reason}")
            totals["skipped"] += 1
        elif status == "FIXED":
            el = ET.SubElement(tc, "failure", type="fixed",
                               message=f"known failure now passes ({entry.upstream}); update the baseline")
            el.text = detail
            totals["failures"] += 1
        elif status == "NEW_FAIL":
            tag = "error" if r["verdict"] in NO_OUTPUT else "failure"
            msg = f"{r['verdict']}: {one_line(r.get('message') or '')}"
            if entry:
                msg = f"baseline expects {entry.verdict} ({entry.upstream}), got {msg}"
            el = ET.SubElement(tc, tag, type=r["verdict"], message=msg)
            el.text = detail
            totals["errors" if tag == "error" else "failures"] += 1
    suite.set("tests", str(len(records)))
    for k in ("failures", "errors", "skipped"):
        suite.set(k, str(totals[k]))
    suite.set("time", f"{sum(r.get('seconds') or 0.0 for r in records):.3f}")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
