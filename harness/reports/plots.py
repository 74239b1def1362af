"""The plots of report.html, as base64 PNG (matplotlib's object API: no pyplot state, no display).

Errors are plotted in units of the bound (the record's max_err_over_tol):
1 is the tolerance the error model grants that very row, whatever its
values. ULPs at a reference near zero say nothing (they reached 10^42), so
they are no longer plotted.
"""
from __future__ import annotations

import base64
import io

from harness.core.verdicts import Status, Verdict
from harness.reports.baseline import case_label
from harness.reports.known import Known, cells, paths_of

# err/bound is drawn on a log axis clipped to [CLIP_LOW, CLIP_HIGH]: below a thousandth of the
# bound every implementation is equally right; above a million times it, equally wrong.
CLIP_LOW, CLIP_HIGH = 1e-3, 1e6
VERDICT_COLOURS = {Verdict.PASS: "tab:green", Verdict.INACCURATE: "tab:red", Verdict.NONFINITE: "tab:purple",
                   Verdict.DTYPE_MISMATCH: "tab:orange", Verdict.SHAPE_MISMATCH: "tab:brown"}


def png(fig) -> str:
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
            new = sum(known.status(r) in (Status.NEW_FAIL, Status.FIXED) for r in rs) if known.baseline is not None else 0
            ax.text(j, i, f"{passing}/{len(rs)}" + (f"\n{new} new" if new else ""),
                    ha="center", va="center", fontsize=8)
    cmap = colormaps["RdYlGn"].with_extremes(bad="#dddddd")  # grey: nothing ran there
    im = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(paths)), paths, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), [f"{p} {d}" for p, d in rows])
    ax.set_title("Verdicts: passing / executions per pattern × dtype and path")
    fig.colorbar(im, ax=ax, label="fraction passing", fraction=0.04)
    return png(fig)


def err_bound_points(records: list[dict]) -> tuple[list[tuple[str, str, float, str]], dict[str, int]]:
    """(path, verdict, clipped err/bound, marker) per plottable record, and per path how many have no value.

    A nonfinite output without a finite ratio is drawn at the top (infinitely
    over); error, crash, timeout and unsupported have no output to measure.
    """
    points, unmeasured = [], {}
    for r in records:
        v = r.get("max_err_over_tol")
        if v is None and r["verdict"] == Verdict.NONFINITE:
            v = float("inf")
        if v is None:
            unmeasured[r["path"]] = unmeasured.get(r["path"], 0) + 1
            continue
        marker = "^" if v > CLIP_HIGH else "v" if v < CLIP_LOW else "o"
        points.append((r["path"], r["verdict"], min(max(v, CLIP_LOW), CLIP_HIGH), marker))
    return points, unmeasured


def plot_err_bound(records: list[dict]) -> str:
    """Per path, every execution's largest error over its bound (log, clipped), coloured by verdict."""
    import numpy as np
    from matplotlib.figure import Figure

    paths = paths_of(records)
    points, unmeasured = err_bound_points(records)
    rng = np.random.default_rng(0)  # jitter only; fixed so the picture is reproducible
    fig = Figure(figsize=(2.5 + 1.1 * len(paths), 4.8))
    ax = fig.add_subplot()
    column = {p: j for j, p in enumerate(paths)}
    for verdict in sorted({p[1] for p in points}, key=lambda v: (v != Verdict.PASS, v)):
        for marker in ("o", "^", "v"):
            sel = [p for p in points if p[1] == verdict and p[3] == marker]
            if not sel:
                continue
            xs = np.array([column[p[0]] for p in sel], dtype=float) + rng.uniform(-0.3, 0.3, len(sel))
            ax.scatter(xs, [p[2] for p in sel], s=12, alpha=0.6, marker=marker,
                       color=VERDICT_COLOURS.get(verdict, "tab:gray"), label=verdict if marker == "o" else None)
    for p, n in unmeasured.items():
        ax.annotate(f"{n} without\nan error/bound", (column[p], 1.0), xycoords=("data", "axes fraction"),
                    ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
    ax.text(-0.55, 1.0, "the bound", va="bottom", ha="left", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(CLIP_LOW / 2, CLIP_HIGH * 2)
    ax.set_xticks(range(len(paths)), paths, rotation=30, ha="right")
    ax.set_xlim(-0.6, len(paths) - 0.4)
    ax.set_ylabel("max error / bound (log)")
    ax.set_title(f"Error in units of the bound, per path (clipped to [{CLIP_LOW:g}, {CLIP_HIGH:g}]: "
                 "▲ above, ▼ below)", pad=24)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, title="verdict", fontsize=8, loc="upper left", bbox_to_anchor=(1.08, 1.0))
    return png(fig)


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
    return png(fig)
