"""A model's report (`normdiff model`, docs/models.md): its norm instances in model order, per path, and the whole
model's error beside eager's. Reads only the records and the capture's plain data (OUT/model.json)."""
from __future__ import annotations

import html
import re

from harness.core.verdicts import Verdict


def _cell(record: dict | None) -> str:
    if record is None:
        return "—"
    over = record.get("max_err_over_tol")
    verdict = str(record["verdict"])
    return f"{verdict} {over:.3g}" if isinstance(over, (int, float)) else verdict


def by_instance(about: dict, records: list[dict]) -> dict[str, dict[str, dict]]:
    """{module path: {path: record}}."""
    ids = {i["case_id"]: i["path"] for i in about["instances"] if i.get("case_id")}
    out: dict[str, dict[str, dict]] = {}
    for r in records:
        if r["case_id"] in ids:
            out.setdefault(ids[r["case_id"]], {})[r["path"]] = r
    return out


def first_over(about: dict, records: list[dict]) -> dict[str, str | None]:
    """{path: the first instance, in model order, whose verdict is not pass (None: every one passes)}."""
    table = by_instance(about, records)
    out: dict[str, str | None] = {}
    for p in about["paths"]:
        out[p] = next((i["path"] for i in about["instances"]
                       if table.get(i["path"], {}).get(p) and table[i["path"]][p]["verdict"] != Verdict.PASS), None)
    return out


def model_table(about: dict, records: list[dict]) -> str:
    """The markdown report: the instances table, the first over its bound per path, the whole model per path."""
    table = by_instance(about, records)
    paths = about["paths"]
    planted = about.get("outliers")
    lines = [f"# {about['target']} in {about['dtype']}", ""]
    if planted:
        lines += [f"Outliers planted into {planted['where']}: {planted['value']:.4g} ({planted['scale']:g} x the "
                  f"median {planted['median']:.3g}) in channels {planted['channels']} at tokens {planted['tokens']}.",
                  ""]
    if about.get("problem"):
        lines += [f"**The capture stopped:** {about['problem']}", ""]
    if not about["instances"]:
        lines += ["No norm instance was found: no submodule is one of torch's norms or a class the zoo's rules call "
                  "a norm (functional norm calls in a forward are not instances).", ""]
    lines += ["## Norm instances (verdict and error over its bound, per path)", "",
              "| instance | class | dtype | shape | max abs x | " + " | ".join(paths) + " |",
              "|---|---|---|---|---|" + "---|" * len(paths)]
    for i in about["instances"]:
        cls = i["cls"].rpartition(":")[2]
        big = f"{i['max_abs']:.4g}" if i.get("max_abs") is not None else "—"
        if i.get("note"):
            lines.append(f"| `{i['path']}` | {cls} | | | | {i['note']} |" + " |" * (len(paths) - 1))
            continue
        shape = "x".join(map(str, i["shape"]))
        cells = " | ".join(_cell(table.get(i["path"], {}).get(p)) for p in paths)
        lines.append(f"| `{i['path']}` | {cls} | {i['dtype']} | {shape} | {big} | {cells} |")
    lines += ["", "## The first instance over its bound, per path", ""]
    for p, inst in first_over(about, records).items():
        lines.append(f"* `{p}`: " + (f"`{inst}`" if inst else "none"))
    if about.get("whole"):
        lines += ["", "## The whole model against the float64 model (no verdict: no bound is derived)", "",
                  "| path | max rel err | max abs err | out dtype | note |", "|---|---|---|---|---|"]
        for w in about["whole"]:
            rel = f"{w['rel_err']:.3g}" if w.get("rel_err") is not None else "—"
            err = f"{w['max_abs_err']:.3g}" if w.get("max_abs_err") is not None else "—"
            lines.append(f"| `{w['path']}` | {rel} | {err} | {w.get('out_dtype') or '—'} | {w.get('failure') or ''} |")
    return "\n".join(lines) + "\n"


def _natural(path: str) -> list:
    """A module path's sort key: its numbers as numbers (layers.2 before layers.10)."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path)]


def instance_records(records: list[dict]) -> dict[str, dict[str, dict[str, dict]]]:
    """{model class: {instance path (natural order): {path: record}}} of the records of norm instances."""
    out: dict[str, dict[str, dict[str, dict]]] = {}
    for r in records:
        inst = (r.get("case") or {}).get("instance")
        if inst:
            out.setdefault(r["case"]["class"], {}).setdefault(inst, {})[r["path"]] = r
    return {m: dict(sorted(v.items(), key=lambda kv: _natural(kv[0]))) for m, v in out.items()}


def plot_instances(model: str, table: dict[str, dict[str, dict]]) -> str:
    """Per path, each instance's error over its bound along the model (module paths in order), the bound at 1."""
    from matplotlib.figure import Figure

    from harness.reports.plots import CLIP_HIGH, CLIP_LOW, png

    names = list(table)
    paths = sorted({p for row in table.values() for p in row})
    fig = Figure(figsize=(3 + 0.45 * len(names), 4.2))
    ax = fig.add_subplot()
    for p in paths:
        ys = [table[n].get(p, {}).get("max_err_over_tol") for n in names]
        xs = [i for i, y in enumerate(ys) if isinstance(y, (int, float))]
        ax.plot(xs, [min(max(ys[i], CLIP_LOW), CLIP_HIGH) for i in xs], marker="o", label=p)
        bad = [i for i in xs if table[names[i]][p]["verdict"] != Verdict.PASS]  # a dtype_mismatch may sit below 1
        ax.scatter(bad, [min(max(ys[i], CLIP_LOW), CLIP_HIGH) for i in bad], marker="x", s=60, color="red", zorder=3,
                   label=f"{p}: not pass" if bad else None)
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)), names, rotation=40, ha="right", fontsize=7)
    ax.set_ylabel("max error / bound (log)")
    ax.set_title(f"{model.rpartition(':')[2]}: each norm instance, per path (dashed: its bound; x: not pass)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return png(fig)


def model_html(records: list[dict]) -> str:
    """report.html's section for the norm instances of whole models (empty when there are none)."""
    out = []
    for model, table in instance_records(records).items():
        out.append(f"<h2>Norm instances of {html.escape(model)} ({len(table)})</h2>")
        out.append(f'<img alt="instances of {html.escape(model)}" src="data:image/png;base64,'
                   f'{plot_instances(model, table)}">')
    return "\n".join(out)
