"""report.html: one self-contained offline file (plots embedded as PNG, the table's script inline).

What a CI team reads first: the failures by bug family (one row per upstream
report or triage reason, with its simplest case and the command that
reproduces it), the pass rate of each path over the recorded runs, then the
plots, the worst cases and every failing execution in a table to sort and
filter.
"""
from __future__ import annotations

import html
from collections import Counter

from harness.attribution.describe import family_stage_text, first_stage_text
from harness.core.verdicts import VERDICTS, Status
from harness.reports import baseline as gate
from harness.reports.failure_table import failure_table, outputs_html
from harness.reports.families import Family, elements, families
from harness.reports.model_view import model_html
from harness.reports.zoo_view import zoo_html
from harness.reports.known import (
    Known,
    counts_failing,
    fmt,
    paths_of,
    repro_command,
    sort_key,
    spec_lines,
    worst,
)
from harness.reports.plots import plot_err_bound, plot_heatmap, plot_worst
from harness.reports.baseline import case_label

RECENT_RUNS = 10  # runs shown one by one in the pass-rate table

_CSS = """body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top;font-size:13px}
th{background:#eee}#failures th{cursor:pointer}pre{white-space:pre-wrap;margin:0;font-size:12px}img{max-width:100%}
.filters label{margin-right:1em}.filters select{max-width:28em}
.NEW_FAIL,.FIXED{color:#b00;font-weight:bold}.XFAIL,.FLAKY{color:#a60}.PASS{color:#070}"""
# the per-output lines' style, only on a page that has them (a page of one-output records is what it was)
_OUTPUT_CSS = ".output{font-size:12px;color:#444}"


def _img(b64: str | None, alt: str) -> str:
    if not b64:
        return f"<p>{html.escape(alt)}: nothing to plot.</p>"
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}"></p>'


def family_table(groups: list[Family], out_dir: str) -> str:
    e = html.escape
    if not groups:
        return "<p>No failing executions.</p>"
    out = ['<table id="families"><thead><tr><th>executions</th><th>family (upstream: reason)</th><th>paths</th>'
           "<th>dtypes</th><th>patterns</th><th>verdicts</th><th>worst error / bound</th>"
           "<th>first stage over its bound</th>"
           "<th>simplest case and its reproduction</th></tr></thead><tbody>"]
    for f in groups:
        r = f.simplest
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(f.verdicts.items()))
        out.append(
            f'<tr data-family="{f.slug}"><td>{len(f.records)}</td>'
            f'<td><a href="#family={f.slug}">{e(f.shown)}</a></td><td>{e(", ".join(f.paths))}</td>'
            f'<td>{e(", ".join(f.dtypes))}</td><td>{e(", ".join(f.patterns))}</td><td>{e(verdicts)}</td>'
            f"<td>{fmt(f.worst_ratio, '.3g')}</td><td>{e(family_stage_text(f.records))}</td>"
            f"<td>{e(r['path'])} on {e(case_label(r['case'], r['case_id']))} ({elements(r['case'])} elements)"
            f"<pre>{e(repro_command(out_dir, r))}</pre></td></tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def pass_rate_table(history: dict[str, list[tuple]] | None, paths: list[str]) -> str:
    """Per path: runs, executions and pass rate over the recorded runs, then the last few runs' rates."""
    e = html.escape
    if not history:
        return "<p>No run history recorded (see <code>--history</code>).</p>"
    shown = [p for p in paths if p in history] + sorted(p for p in history if p not in paths)
    out = ['<table id="pass-rates"><thead><tr><th>path</th><th>runs</th><th>executions</th><th>pass rate</th>'
           f"<th>last {RECENT_RUNS} runs (oldest first: run id, passing/executions)</th></tr></thead><tbody>"]
    for p in shown:
        runs = history[p]
        passed, total = sum(r[2] for r in runs), sum(r[3] for r in runs)
        recent = ", ".join(f"#{r[0]} {r[2]}/{r[3]}" for r in runs[-RECENT_RUNS:])
        out.append(f'<tr data-path="{e(p)}"><td>{e(p)}</td><td>{len(runs)}</td><td>{total}</td>'
                   f"<td>{100.0 * passed / total if total else 0.0:.1f}%</td><td>{e(recent)}</td></tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def report_html(records: list[dict], title: str = "normdiff results", *, out_dir: str = ".",
                baseline: dict | None = None, history: dict | None = None) -> str:
    """One self-contained page; `history` is harness.reports.history.pass_rates() (or None)."""
    e = html.escape
    known = Known(baseline)
    records = sorted(records, key=sort_key)
    paths = paths_of(records)
    counts = Counter(r["verdict"] for r in records)
    groups = families(records, known)
    top = worst(records, known)
    parts = [f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
             f"<style>{_CSS}{_OUTPUT_CSS if any(r.get('outputs') for r in records) else ''}</style></head><body>",
             f"<h1>{e(title)}</h1>"]
    parts.append(f"<p>{len(records)} executions of {len({r['case_id'] for r in records})} cases on "
                 f"{len(paths)} paths: " + e(", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v])) + ".</p>")
    if records:
        v = records[0].get("versions") or {}
        parts.append("<p>Versions: " + e(", ".join(f"{k} {v[k]}" for k in sorted(v) if v[k])) + ".</p>")
    if baseline is not None:
        status = Counter(known.status(r) for r in records)
        parts.append("<p>Against the baseline of " + str(len(baseline)) + " known failures: " + ", ".join(
            f'<span class="{s}">{status[s]} {s}</span>' for s in gate.STATUSES if s != Status.MISSING) + ".</p>")

    parts.append(f"<h2>Failures by family ({len(groups)} families, {counts_failing(records)} executions)</h2>")
    parts.append(family_table(groups, out_dir))
    parts.append("<h2>Verdicts by path</h2><table><tr><th>path</th>"
                 + "".join(f"<th>{v}</th>" for v in VERDICTS) + "</tr>")
    for p in paths:
        c = Counter(r["verdict"] for r in records if r["path"] == p)
        parts.append(f"<tr><td>{e(p)}</td>" + "".join(f"<td>{c[v] or ''}</td>" for v in VERDICTS) + "</tr>")
    parts.append("</table>")
    parts.append(zoo_html(records, paths))
    parts.extend(section for section in (model_html(records),) if section)  # a run of no model adds nothing
    parts.append("<h2>Pass rate per path over the recorded runs</h2>" + pass_rate_table(history, paths))

    if records:
        parts.append("<h2>Pattern × dtype against path</h2>" + _img(plot_heatmap(records, known), "verdict heatmap"))
        parts.append("<h2>Error over the bound per path</h2>"
                     + _img(plot_err_bound(records), "error over bound per path"))
    parts.append(f"<h2>Worst cases ({len(top)} of {counts_failing(records)} failing)</h2>")
    parts.append(_img(plot_worst(top, known), "worst cases"))
    if top:
        parts.append("<table><tr><th>#</th><th>path</th><th>verdict</th><th>error / bound</th><th>max ulp</th>"
                     "<th>first stage over its bound</th>"
                     "<th>baseline</th><th>message</th><th>spec and reproduction</th></tr>")
        for n, r in enumerate(top, 1):
            status = known.status(r) if baseline is not None else ""
            parts.append(
                f"<tr><td>{n}</td><td>{e(r['path'])}</td><td>{e(r['verdict'])}</td>"
                f"<td>{fmt(r.get('max_err_over_tol'))}{outputs_html(r)}</td><td>{fmt(r.get('max_ulp'))}</td>"
                f"<td>{e(first_stage_text(r))}</td>"
                f'<td class="{status}">{e(known.note(r))}</td><td>{e(r.get("message") or "")}</td>'
                f"<td><pre>{e(spec_lines(r['case']))}</pre><pre>{e(repro_command(out_dir, r))}</pre></td></tr>")
        parts.append("</table>")
    parts.append(f"<h2>Every failing execution ({counts_failing(records)})</h2>")
    parts.append(failure_table(records, known, groups))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
