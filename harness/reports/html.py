"""report.html: one self-contained offline file, plots embedded as PNG (matplotlib, no pyplot state)."""
from __future__ import annotations

import base64
import html
import io
from collections import Counter

from harness.core.verdicts import VERDICTS, Status, Verdict
from harness.reports import baseline as gate
from harness.reports.baseline import case_label
from harness.reports.known import (
    Known,
    cells,
    counts_failing,
    fmt,
    paths_of,
    repro_command,
    sort_key,
    spec_lines,
    worst,
)


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def plot_heatmap(records: list[dict], known: Known) -> str:
    """Pass fraction per (pattern, dtype) × path, each cell annotated passing/total (and new failures)."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    paths = paths_of(records)
    by_cell = cells(records)
    rows = sorted({(k[0], k[1]) for k in by_cell})
    data = np.full((len(rows), len(paths)), np.nan)
    fig = Figure(figsize=(2.2 + 1.25 * len(paths), 1.0 + 0.45 * len(rows)))
    ax = fig.add_subplot()
    for i, row in enumerate(rows):
        for j, p in enumerate(paths):
            rs = by_cell.get((*row, p), [])
            if not rs:
                continue
            passing = sum(r["verdict"] == Verdict.PASS for r in rs)
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

    paths = paths_of(records)
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


def plot_worst(top: list[dict], known: Known) -> str | None:
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
    known = Known(baseline)
    records = sorted(records, key=sort_key)
    paths = paths_of(records)
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
            f'<span class="{s}">{status[s]} {s}</span>' for s in gate.STATUSES if s != Status.MISSING) + ".</p>")

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
                f"<td>{fmt(r.get('max_err_over_tol'))}</td><td>{fmt(r.get('max_ulp'))}</td>"
                f'<td class="{status}">{e(known.note(r))}</td><td>{e(r.get("message") or "")}</td>'
                f"<td><pre>{e(spec_lines(r['case']))}</pre><pre>{e(repro_command(out_dir, r))}</pre></td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
