"""Reports from result records: summary.md, junit.xml and report.html.

Every report is a function of the records and the baseline of known failures
alone, so `run` and `merge` write the same bytes for the same records. The
baseline is reports/baseline.json under the current directory when it exists
(or one given explicitly); known failures are marked as such in every report.
The worst cases' and each bug family's simplest case's specs are written to
cases/CASE_ID.json next to the reports, so each repro command in them can be
pasted as is. Every file is replaced atomically. The pass rates of the run
history, when given, are one more input (so the same records, baseline and
history give the same bytes).
"""
from __future__ import annotations

import glob
import json
import os
import re

from harness.core.records import write_atomic
from harness.reports import baseline as gate
from harness.reports.families import families
from harness.reports.html import report_html
from harness.reports.junit import junit_xml
from harness.reports.known import Known, spec_file, worst
from harness.reports.summary import summary_markdown


def _write_specs(out_dir: str, top: list[dict]) -> list[str]:
    """cases/CASE_ID.json for each worst case; stale spec files from earlier reports are removed."""
    folder = os.path.join(out_dir, "cases")
    wanted = {spec_file(out_dir, r): r for r in top}
    for old in glob.glob(os.path.join(folder, "*.json")):
        if re.fullmatch(r"[0-9a-f]{12}\.json", os.path.basename(old)) and old not in wanted:
            os.remove(old)
    if wanted:
        os.makedirs(folder, exist_ok=True)
    return [write_atomic(path, json.dumps(r["case"], indent=2) + "\n") for path, r in sorted(wanted.items())]


def write_reports(records: list[dict], out_dir: str, baseline=None, history: dict | None = None) -> list[str]:
    """Write summary.md, junit.xml, report.html and the specs they cite; return the files written.

    `baseline` is a dict of entries (gate.load_baseline), a file path, or None
    for reports/baseline.json under the current directory when it exists.
    `history` is harness.reports.history.pass_rates() for report.html, or None.
    """
    if baseline is None:
        baseline = gate.default_baseline()
    elif isinstance(baseline, str):
        baseline = gate.load_baseline(baseline)
    os.makedirs(out_dir, exist_ok=True)
    kw = {"out_dir": out_dir, "baseline": baseline}
    written = [
        write_atomic(os.path.join(out_dir, "summary.md"), summary_markdown(records, **kw)),
        write_atomic(os.path.join(out_dir, "junit.xml"), junit_xml(records, **kw)),
        write_atomic(os.path.join(out_dir, "report.html"), report_html(records, history=history, **kw)),
    ]
    known = Known(baseline)
    cited = worst(records, known) + [f.simplest for f in families(records, known)]
    return written + _write_specs(out_dir, cited)
