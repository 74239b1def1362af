"""Reports from result records: summary.md (and the other formats' registry).

Every report is a function of the records alone, so `run` and `merge` write
the same reports for the same records.
"""
from __future__ import annotations

import json
import os
from collections import Counter, defaultdict

VERDICTS = ("pass", "inaccurate", "dtype_mismatch", "shape_mismatch", "nonfinite",
            "error", "crash", "timeout", "unsupported")


def _sort_key(r: dict):
    return (r["case"]["pattern"], r["case"]["dtype"], r["case_id"], r["path"])


def _badness(r: dict) -> tuple:
    order = {v: i for i, v in enumerate(reversed(VERDICTS))}
    return (-order.get(r["verdict"], 0), -(r.get("max_err_over_tol") or 0.0))


def summary_markdown(records: list[dict], title: str = "normdiff results") -> str:
    records = sorted(records, key=_sort_key)
    paths = sorted({r["path"] for r in records}, key=lambda p: (p != "eager", p))
    counts = Counter(r["verdict"] for r in records)
    lines = [f"# {title}", ""]
    cases = len({r["case_id"] for r in records})
    lines.append(f"{len(records)} executions of {cases} cases on {len(paths)} paths: "
                 + ", ".join(f"{counts[v]} {v}" for v in VERDICTS if counts[v]) + ".")
    if records:
        v = records[0].get("versions", {})
        lines.append("")
        lines.append("Versions: " + ", ".join(f"{k} {v[k]}" for k in sorted(v) if v[k]) + ".")

    lines += ["", "## Verdicts by path", "", "| path | " + " | ".join(VERDICTS) + " |",
              "|---|" + "---|" * len(VERDICTS)]
    for p in paths:
        c = Counter(r["verdict"] for r in records if r["path"] == p)
        lines.append(f"| {p} | " + " | ".join(str(c[v]) if c[v] else "" for v in VERDICTS) + " |")

    lines += ["", "## Pattern × dtype against path", "",
              "Each cell: passing / all executions, then the other verdicts.", "",
              "| pattern | dtype | " + " | ".join(paths) + " |", "|---|---|" + "---|" * len(paths)]
    cells: dict[tuple[str, str, str], Counter] = defaultdict(Counter)
    for r in records:
        cells[(r["case"]["pattern"], r["case"]["dtype"], r["path"])][r["verdict"]] += 1
    for pattern, dtype in sorted({(k[0], k[1]) for k in cells}):
        row = []
        for p in paths:
            c = cells.get((pattern, dtype, p), Counter())
            total = sum(c.values())
            if not total:
                row.append("")
                continue
            other = ", ".join(f"{n} {v}" for v, n in sorted(c.items()) if v != "pass")
            row.append(f"{c['pass']}/{total}" + (f" ({other})" if other else ""))
        lines.append(f"| {pattern} | {dtype} | " + " | ".join(row) + " |")

    failing = sorted((r for r in records if r["verdict"] != "pass"), key=_badness)
    lines += ["", f"## Failing executions ({len(failing)})", ""]
    if not failing:
        lines.append("None.")
    for r in failing[:50]:
        spec = json.dumps(r["case"], sort_keys=True)
        lines += [f"### {r['verdict']}: {r['path']} on case {r['case_id']}", "",
                  f"- message: {r.get('message', '')}",
                  f"- max abs err {r.get('max_abs_err')}, eager's {r.get('eager_max_abs_err')}, "
                  f"out dtype {r.get('out_dtype')} (expected {r.get('expected_dtype')})"
                  + (f", stage {r['stage']}" if r.get("stage") else ""),
                  f"- spec: `{spec}`",
                  f"- reproduce: `normdiff run --case CASE.json --paths eager,{r['path']}` "
                  f"with the spec above in CASE.json", ""]
    if len(failing) > 50:
        lines.append(f"… and {len(failing) - 50} more in results.jsonl.")
    return "\n".join(lines) + "\n"


def write_reports(records: list[dict], out_dir: str) -> list[str]:
    """Write every report for `records` into out_dir; return the files written."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    path = os.path.join(out_dir, "summary.md")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(summary_markdown(records))
    written.append(path)
    return written
