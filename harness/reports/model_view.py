"""A model's report (`normdiff model`, docs/models.md): its norm instances in model order, per path, and the whole
model's error beside eager's. Reads only the records and the capture's plain data (OUT/model.json)."""
from __future__ import annotations

import os

from harness.core.records import write_atomic


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
                       if table.get(i["path"], {}).get(p) and table[i["path"]][p]["verdict"] != "pass"), None)
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
            lines.append(f"| `{w['path']}` | {rel} | {err} | {w.get('out_dtype') or '—'} | {w.get('error') or ''} |")
    return "\n".join(lines) + "\n"


def write_model_reports(about: dict, records: list[dict], out_dir: str) -> None:
    """OUT/model.md (the table) and, from the records, the usual reports (summary.md, report.html, …)."""
    from harness.reports.write import write_reports

    write_atomic(os.path.join(out_dir, "model.md"), model_table(about, records))
    if records:
        write_reports(records, out_dir)
