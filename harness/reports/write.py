"""Reports from result records: summary.md, junit.xml and report.html.

Every report is a function of the records and the baseline of known failures
alone, so `run` and `merge` write the same bytes for the same records. The
baseline is reports/baseline.json under the current directory when it exists
(or one given explicitly); known failures are marked as such in every report.
The worst cases' specs are written to cases/CASE_ID.json next to the reports,
so each repro command in them can be pasted as is.
"""
from __future__ import annotations

import base64
import glob
import html
import io
import json
import os
import re
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict

from harness.reports import baseline as gate
from harness.reports.baseline import VERDICTS, case_label

WORST = 20            # worst cases shown with spec and repro command
FAILING_LISTED = 200  # failing executions listed in summary.md
_CRASHES = ("error", "crash", "timeout")


def _sort_key(r: dict):
    return (r["case"]["pattern"], r["case"]["dtype"], r["case_id"], r["path"])


def _paths(records: list[dict]) -> list[str]:
    return sorted({r["path"] for r in records}, key=lambda p: (p != "eager", p))


def _badness(r: dict) -> tuple:
    order = {v: i for i, v in enumerate(reversed(VERDICTS))}
    return (-order.get(r["verdict"], 0), -(r.get("max_err_over_tol") or 0.0), r["case_id"], r["path"])


class _Known:
    """The baseline as the reports use it: each record's gate status and entry."""

    def __init__(self, baseline: dict | None):
        self.baseline = baseline
        self.entries = baseline or {}

    def entry(self, r: dict):
        return self.entries.get((r["case_id"], r["path"]))

    def status(self, r: dict) -> str:
        return gate.judge(r, self.entry(r))

    def is_known(self, r: dict) -> bool:
        return self.status(r) == "XFAIL"

    def note(self, r: dict) -> str:
        e = self.entry(r)
        if self.baseline is None:
            return ""
        if e is None:
            return "new (not in the baseline)"
        if r["verdict"] == e.verdict:
            return f"known ({e.upstream}): {e.reason}"
        return f"baseline expects {e.verdict} ({e.upstream}: {e.reason})"


def worst(records: list[dict], known: _Known, n: int = WORST) -> list[dict]:
    """The n worst failing executions: failures not in the baseline first, then by verdict and error/bound."""
    failing = [r for r in records if r["verdict"] != "pass"]
    return sorted(failing, key=lambda r: (known.is_known(r), _badness(r)))[:n]


def _spec_file(out_dir: str, r: dict) -> str:
    return os.path.join(out_dir, "cases", f"{r['case_id']}.json")


def repro_command(out_dir: str, r: dict) -> str:
    return f"normdiff repro {_spec_file(out_dir, r)} --path {r['path']}"


def _fmt(v, spec: str = ".4g") -> str:
    return "-" if v is None else format(v, spec)


# -- summary.md ---------------------------------------------------------------

def summary_markdown(records: list[dict], title: str = "normdiff results", *, out_dir: str = ".",
                     baseline: dict | None = None) -> str:
    known = _Known(baseline)
    records = sorted(records, key=_sort_key)
    paths = _paths(records)
    counts = Counter(r["verdict"] for r in records)
    lines = [f"# {title}", ""]
    cases = len({r["case_id"] for r in records})
    lines.append(f"{len(records)} executions of {cases} cases on {len(paths)} paths: "
                 + ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v]) + ".")
    if records:
        v = records[0].get("versions", {})
        lines.append("")
        lines.append("Versions: " + ", ".join(f"{k} {v[k]}" for k in sorted(v) if v[k]) + ".")

    if baseline is not None:
        status = Counter(known.status(r) for r in records)
        lines += ["", "## Against the baseline", "",
                  ", ".join(f"{status[s]} {s}" for s in gate.STATUSES if s != "MISSING") + " "
                  f"({len(baseline)} known failures; `normdiff gate` also reports those not run)."]
        fixed = [r for r in records if known.status(r) == "FIXED"]
        if fixed:
            lines += ["", "Known failures that now pass (remove them from the baseline):", ""]
            lines += [f"- {r['path']} on {case_label(r['case'], r['case_id'])}: {known.note(r)}" for r in fixed]

    lines += ["", "## Verdicts by path", "", "| path | " + " | ".join(VERDICTS) + " |",
              "|---|" + "---|" * len(VERDICTS)]
    for p in paths:
        c = Counter(r["verdict"] for r in records if r["path"] == p)
        lines.append(f"| {p} | " + " | ".join(str(c[v]) if c[v] else "" for v in VERDICTS) + " |")

    lines += ["", "## Pattern × dtype against path", "",
              "Each cell: passing / all executions, then the other verdicts.", "",
              "| pattern | dtype | " + " | ".join(paths) + " |", "|---|---|" + "---|" * len(paths)]
    cells = _cells(records)
    for pattern, dtype in sorted({(k[0], k[1]) for k in cells}):
        row = []
        for p in paths:
            c = Counter(r["verdict"] for r in cells.get((pattern, dtype, p), []))
            total = sum(c.values())
            if not total:
                row.append("")
                continue
            other = ", ".join(f"{n} {v}" for v, n in sorted(c.items()) if v != "pass")
            row.append(f"{c['pass']}/{total}" + (f" ({other})" if other else ""))
        lines.append(f"| {pattern} | {dtype} | " + " | ".join(row) + " |")

    failing = sorted((r for r in records if r["verdict"] != "pass"), key=lambda r: (known.is_known(r), _badness(r)))
    top = worst(records, known)
    lines += ["", f"## Worst cases ({len(top)} of {len(failing)} failing executions)", ""]
    if not failing:
        lines.append("None.")
    for r in top:
        note = known.note(r)
        lines += [f"### {r['verdict']}: {r['path']} on {case_label(r['case'], r['case_id'])}", "",
                  f"- message: {r.get('message', '')}",
                  f"- max abs err {_fmt(r.get('max_abs_err'))} ({_fmt(r.get('max_ulp'))} ulp), "
                  f"{_fmt(r.get('max_err_over_tol'))}x the bound; eager's {_fmt(r.get('eager_max_abs_err'))}; "
                  f"out dtype {r.get('out_dtype')} (expected {r.get('expected_dtype')})"
                  + (f", stage {r['stage']}" if r.get("stage") else "")]
        if note:
            lines.append(f"- baseline: {note}")
        lines += [f"- spec: `{json.dumps(r['case'])}`",
                  f"- reproduce: `{repro_command(out_dir, r)}`", ""]

    if failing:
        listed = failing[:FAILING_LISTED]
        lines += ["", f"## All failing executions ({len(failing)})", "",
                  "| path | case | verdict | error/bound | baseline |", "|---|---|---|---|---|"]
        for r in listed:
            note = known.note(r).replace("|", "/")
            lines.append(f"| {r['path']} | {case_label(r['case'], r['case_id'])} | {r['verdict']} | "
                         f"{_fmt(r.get('max_err_over_tol'), '.3g')} | {note} |")
        if len(failing) > len(listed):
            lines.append(f"\n… and {len(failing) - len(listed)} more in results.jsonl.")
    return "\n".join(lines) + "\n"


def _cells(records: list[dict]) -> dict[tuple[str, str, str], list[dict]]:
    cells: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for r in records:
        cells[(r["case"]["pattern"], r["case"]["dtype"], r["path"])].append(r)
    return cells


# -- junit.xml ----------------------------------------------------------------

def junit_xml(records: list[dict], *, out_dir: str = ".", baseline: dict | None = None) -> str:
    """One testcase per case × path; known failures are skipped with their reason.

    A failure not in the baseline is a <failure> (an <error> for error, crash
    and timeout); a known failure that now passes, or fails another way, is a
    <failure> too, as the gate and strict xfail treat it.
    """
    known = _Known(baseline)
    rank = {p: i for i, p in enumerate(_paths(records))}
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
        if status == "XFAIL":
            el = ET.SubElement(tc, "skipped", type="xfail", message=f"known failure ({entry.upstream}): {entry.reason}")
            totals["skipped"] += 1
        elif status == "FIXED":
            el = ET.SubElement(tc, "failure", type="fixed",
                               message=f"known failure now passes ({entry.upstream}); update the baseline")
            el.text = detail
            totals["failures"] += 1
        elif status == "NEW_FAIL":
            tag = "error" if r["verdict"] in _CRASHES else "failure"
            msg = f"{r['verdict']}: {gate._one_line(r.get('message') or '')}"
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


# -- plots (matplotlib, Agg, no pyplot state) --------------------------------------

def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def plot_heatmap(records: list[dict], known: _Known) -> str:
    """Pass fraction per (pattern, dtype) × path, each cell annotated passing/total (and new failures)."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    paths = _paths(records)
    cells = _cells(records)
    rows = sorted({(k[0], k[1]) for k in cells})
    data = np.full((len(rows), len(paths)), np.nan)
    fig = Figure(figsize=(2.2 + 1.25 * len(paths), 1.0 + 0.45 * len(rows)))
    ax = fig.add_subplot()
    for i, row in enumerate(rows):
        for j, p in enumerate(paths):
            rs = cells.get((*row, p), [])
            if not rs:
                continue
            passing = sum(r["verdict"] == "pass" for r in rs)
            data[i, j] = passing / len(rs)
            new = sum(known.status(r) in ("NEW_FAIL", "FIXED") for r in rs) if known.baseline is not None else 0
            ax.text(j, i, f"{passing}/{len(rs)}" + (f"\n{new} new" if new else ""),
                    ha="center", va="center", fontsize=8)
    cmap = colormaps["RdYlGn"].with_extremes(bad="#dddddd")  # grey: nothing ran there
    im = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(paths)), paths, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), [f"{p} {d}" for p, d in rows])
    ax.set_title("Verdicts: passing / executions per pattern × dtype and path")
    fig.colorbar(im, ax=ax, label="fraction passing", fraction=0.04)
    return _png(fig)


def plot_ulps(records: list[dict]) -> str:
    """Per path, every execution's max error in ULPs of its output dtype (symlog), coloured by dtype."""
    import numpy as np
    from matplotlib.figure import Figure

    paths = _paths(records)
    dtypes = sorted({r["case"]["dtype"] for r in records})
    colours = {d: c for d, c in zip(dtypes, ("tab:blue", "tab:orange", "tab:green", "tab:purple"))}
    rng = np.random.default_rng(0)  # jitter only; fixed so the picture is reproducible
    fig = Figure(figsize=(2.5 + 1.1 * len(paths), 4.5))
    ax = fig.add_subplot()
    boxes, positions, labelled = [], [], set()
    for j, p in enumerate(paths):
        rs = [r for r in records if r["path"] == p]
        vals = [r for r in rs if r.get("max_ulp") is not None]
        if vals:
            boxes.append([r["max_ulp"] for r in vals])
            positions.append(j)
        for d in dtypes:
            ys = [r["max_ulp"] for r in vals if r["case"]["dtype"] == d]
            if ys:
                ax.scatter(j + rng.uniform(-0.3, 0.3, len(ys)), ys, s=10, alpha=0.7, color=colours[d],
                           label=None if d in labelled else d)
                labelled.add(d)
        missing = len(rs) - len(vals)
        if missing:
            ax.annotate(f"{missing} without\na result", (j, 1.0), xycoords=("data", "axes fraction"),
                        ha="center", va="bottom", fontsize=7)
    if boxes:
        ax.boxplot(boxes, positions=positions, widths=0.6, showfliers=False)
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_xticks(range(len(paths)), paths, rotation=30, ha="right")
    ax.set_xlim(-0.6, len(paths) - 0.4)
    ax.set_ylabel("max error (ULPs of the output dtype)")
    ax.set_title("Error distribution per path", pad=24)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, title="dtype", fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _png(fig)


def plot_worst(top: list[dict], known: _Known) -> str | None:
    """The worst cases' error over the bound (log scale), new failures in red, known in orange."""
    from matplotlib.figure import Figure

    rated = [r for r in top if r.get("max_err_over_tol")]
    if not rated:
        return None
    fig = Figure(figsize=(9, 1.0 + 0.32 * len(rated)))
    ax = fig.add_subplot()
    labels = [f"{r['path']} · {case_label(r['case'], r['case_id'])}" for r in rated]
    colours = ["tab:orange" if known.is_known(r) else "tab:red" for r in rated]
    ax.barh(range(len(rated)), [r["max_err_over_tol"] for r in rated], color=colours)
    ax.set_yticks(range(len(rated)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=1, linestyle="--")
    ax.set_xlabel("max error / tolerance bound (1 = the bound)")
    ax.set_title("Worst cases (red: not in the baseline, orange: known)")
    return _png(fig)


# -- report.html ------------------------------------------------------------------

_CSS = """body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top;font-size:13px}
th{background:#eee}pre{white-space:pre-wrap;margin:0;font-size:12px}img{max-width:100%}
.NEW_FAIL,.FIXED{color:#b00;font-weight:bold}.XFAIL{color:#a60}.PASS{color:#070}"""


def _img(b64: str | None, alt: str) -> str:
    if not b64:
        return f"<p>{html.escape(alt)}: nothing to plot.</p>"
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}"></p>'


def report_html(records: list[dict], title: str = "normdiff results", *, out_dir: str = ".",
                baseline: dict | None = None) -> str:
    """One self-contained page: counts, three embedded plots, the worst cases with their specs."""
    e = html.escape
    known = _Known(baseline)
    records = sorted(records, key=_sort_key)
    paths = _paths(records)
    counts = Counter(r["verdict"] for r in records)
    top = worst(records, known)
    parts = [f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
             f"<style>{_CSS}</style></head><body>", f"<h1>{e(title)}</h1>"]
    parts.append(f"<p>{len(records)} executions of {len({r['case_id'] for r in records})} cases on "
                 f"{len(paths)} paths: " + e(", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v])) + ".</p>")
    if records:
        v = records[0].get("versions") or {}
        parts.append("<p>Versions: " + e(", ".join(f"{k} {v[k]}" for k in sorted(v) if v[k])) + ".</p>")
    if baseline is not None:
        status = Counter(known.status(r) for r in records)
        parts.append("<p>Against the baseline of " + str(len(baseline)) + " known failures: " + ", ".join(
            f'<span class="{s}">{status[s]} {s}</span>' for s in gate.STATUSES if s != "MISSING") + ".</p>")

    parts.append("<h2>Verdicts by path</h2><table><tr><th>path</th>"
                 + "".join(f"<th>{v}</th>" for v in VERDICTS) + "</tr>")
    for p in paths:
        c = Counter(r["verdict"] for r in records if r["path"] == p)
        parts.append(f"<tr><td>{e(p)}</td>" + "".join(f"<td>{c[v] or ''}</td>" for v in VERDICTS) + "</tr>")
    parts.append("</table>")

    if records:
        parts.append("<h2>Pattern × dtype against path</h2>" + _img(plot_heatmap(records, known), "verdict heatmap"))
        parts.append("<h2>Error distribution per path</h2>" + _img(plot_ulps(records), "error in ULPs per path"))
    parts.append(f"<h2>Worst cases ({len(top)} of {counts_failing(records)} failing)</h2>")
    parts.append(_img(plot_worst(top, known), "worst cases"))
    if top:
        parts.append("<table><tr><th>#</th><th>path</th><th>verdict</th><th>error / bound</th><th>max ulp</th>"
                     "<th>baseline</th><th>message</th><th>spec and reproduction</th></tr>")
        for n, r in enumerate(top, 1):
            status = known.status(r) if baseline is not None else ""
            parts.append(
                f"<tr><td>{n}</td><td>{e(r['path'])}</td><td>{e(r['verdict'])}</td>"
                f"<td>{_fmt(r.get('max_err_over_tol'))}</td><td>{_fmt(r.get('max_ulp'))}</td>"
                f'<td class="{status}">{e(known.note(r))}</td><td>{e(r.get("message") or "")}</td>'
                f"<td><pre>{e(_spec_lines(r['case']))}</pre><pre>{e(repro_command(out_dir, r))}</pre></td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _spec_lines(case: dict) -> str:
    """The spec as JSON with one key a line: readable in a table cell, still valid JSON to paste."""
    return "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in case.items()) + "\n}"


def counts_failing(records: list[dict]) -> int:
    return sum(r["verdict"] != "pass" for r in records)


# -- writing them all -----------------------------------------------------------

def _write(path: str, text: str) -> str:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def _write_specs(out_dir: str, top: list[dict]) -> list[str]:
    """cases/CASE_ID.json for each worst case; stale spec files from earlier reports are removed."""
    folder = os.path.join(out_dir, "cases")
    wanted = {_spec_file(out_dir, r): r for r in top}
    for old in glob.glob(os.path.join(folder, "*.json")):
        if re.fullmatch(r"[0-9a-f]{12}\.json", os.path.basename(old)) and old not in wanted:
            os.remove(old)
    if wanted:
        os.makedirs(folder, exist_ok=True)
    return [_write(path, json.dumps(r["case"], indent=2) + "\n") for path, r in sorted(wanted.items())]


def write_reports(records: list[dict], out_dir: str, baseline=None) -> list[str]:
    """Write summary.md, junit.xml, report.html and the worst cases' specs; return the files written.

    `baseline` is a dict of entries (gate.load_baseline), a file path, or None
    for reports/baseline.json under the current directory when it exists.
    """
    if baseline is None:
        baseline = gate.default_baseline()
    elif isinstance(baseline, str):
        baseline = gate.load_baseline(baseline)
    os.makedirs(out_dir, exist_ok=True)
    kw = {"out_dir": out_dir, "baseline": baseline}
    written = [
        _write(os.path.join(out_dir, "summary.md"), summary_markdown(records, **kw)),
        _write(os.path.join(out_dir, "junit.xml"), junit_xml(records, **kw)),
        _write(os.path.join(out_dir, "report.html"), report_html(records, **kw)),
    ]
    return written + _write_specs(out_dir, worst(records, _Known(baseline)))
