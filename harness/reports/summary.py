"""summary.md: verdict counts, the status against the baseline, the failures by bug family, the worst cases."""
from __future__ import annotations

import json
from collections import Counter

from harness.attribution.describe import family_stage_text, first_stage_text
from harness.core.records import static_scope
from harness.core.verdicts import VERDICTS, Status, Verdict
from harness.reports import baseline as gate
from harness.reports.baseline import case_label
from harness.reports.zoo_view import zoo_markdown
from harness.reports.families import elements, families, family_label, family_of, verdict_shown
from harness.reports.known import (
    FAILING_LISTED,
    Known,
    badness,
    cells,
    fmt,
    output_views,
    paths_of,
    ratio_text,
    repro_command,
    sort_key,
    worst,
)


def summary_markdown(records: list[dict], title: str = "normdiff results", *, out_dir: str = ".",
                     baseline: dict | None = None) -> str:
    known = Known(baseline)
    records = sorted(records, key=sort_key)
    paths = paths_of(records)
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
                  ", ".join(f"{status[s]} {s}" for s in gate.STATUSES if s != Status.MISSING) + " "
                  f"({len(baseline)} known failures; `normdiff gate` also reports those not run)."]
        fixed = [r for r in records if known.status(r) == Status.FIXED]
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
    by_cell = cells(records)
    for pattern, dtype in sorted({(k[0], k[1]) for k in by_cell}):
        row = []
        for p in paths:
            c = Counter(r["verdict"] for r in by_cell.get((pattern, dtype, p), []))
            total = sum(c.values())
            if not total:
                row.append("")
                continue
            other = ", ".join(f"{n} {v}" for v, n in sorted(c.items()) if v != Verdict.PASS)
            row.append(f"{c[Verdict.PASS]}/{total}" + (f" ({other})" if other else ""))
        lines.append(f"| {pattern} | {dtype} | " + " | ".join(row) + " |")

    lines += zoo_markdown(records, paths)

    groups = families(records, known)
    lines += ["", f"## Failures by family ({len(groups)} families)", ""]
    if not groups:
        lines.append("None.")
    else:
        lines += ["One row per upstream report or triage reason; the simplest case is the one with the fewest "
                  "elements.", "",
                  "| executions | family | paths | dtypes | patterns | verdicts | first stage over its bound | "
                  "simplest case | reproduce |",
                  "|---|---|---|---|---|---|---|---|---|"]
    for f in groups:
        r = f.simplest
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(f.verdicts.items()))
        lines.append(f"| {len(f.records)} | {_cell(f.shown)} | {', '.join(f.paths)} | {', '.join(f.dtypes)} | "
                     f"{', '.join(f.patterns)} | {verdicts} | {_cell(family_stage_text(f.records))} | "
                     f"{case_label(r['case'], r['case_id'])} "
                     f"({elements(r['case'])} elements) | `{repro_command(out_dir, r)}` |")

    failing = sorted((r for r in records if r["verdict"] != Verdict.PASS), key=lambda r: (known.is_known(r), badness(r)))
    top = worst(records, known)
    lines += ["", f"## Worst cases ({len(top)} of {len(failing)} failing executions)", ""]
    if not failing:
        lines.append("None.")
    for r in top:
        note = known.note(r)
        lines += [f"### {r['verdict']}: {r['path']} on {case_label(r['case'], r['case_id'])}", "",
                  f"- message: {r.get('message', '')}",
                  f"- max abs err {fmt(r.get('max_abs_err'))} ({fmt(r.get('max_ulp'))} ulp), "
                  f"{fmt(r.get('max_err_over_tol'))}x the bound; eager's {fmt(r.get('eager_max_abs_err'))}; "
                  f"out dtype {r.get('out_dtype')} (expected {r.get('expected_dtype')})"
                  + (f", stage {r['stage']}" if r.get("stage") else "")]
        lines += [f"- output {o.name}: {o.verdict}, max abs err {fmt(o.max_abs_err)} ({fmt(o.max_ulp)} ulp), "
                  f"{fmt(o.max_err_over_tol)}x the bound" for o in output_views(r)]  # several outputs: each
        if first_stage_text(r):
            lines.append(f"- first stage over its bound: {first_stage_text(r)}")
        if r.get("static_control"):
            c = r["static_control"]
            lines.append(f"- compiled statically at this size ({static_scope(r)}): "
                         f"{c['verdict']}, {fmt(c.get('max_err_over_tol'))}x the bound; {c.get('message', '')}")
        if note:
            lines.append(f"- baseline: {note}")
        lines += [f"- spec: `{json.dumps(r['case'])}`",
                  f"- reproduce: `{repro_command(out_dir, r)}`", ""]

    if failing:
        listed = failing[:FAILING_LISTED]
        lines += ["", f"## All failing executions ({len(failing)})", "",
                  "| path | case | verdict | error/bound | family | gate |", "|---|---|---|---|---|---|"]
        for r in listed:
            note = known.status(r) if baseline is not None else ""
            lines.append(f"| {r['path']} | {case_label(r['case'], r['case_id'])} | {verdict_shown(r)} | "
                         f"{_cell(ratio_text(r))} | {_cell(family_label(*family_of(r, known)))} | "
                         f"{note} |")
        if len(failing) > len(listed):
            lines.append(f"\n… and {len(failing) - len(listed)} more in results.jsonl.")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "/").replace("\n", " ")
