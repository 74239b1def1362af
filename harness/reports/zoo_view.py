"""The module cases' view: implementations × paths, with the verdict and the error over the bound, and how
many library classes each row stands for (the zoo groups the classes that share one implementation).

One row per class a module case names (the zoo's representative of its implementation); each cell the
worst verdict of the class's executions on that path (over its dtypes and inputs), how many of them give
it, and the largest error over the bound. A class the installed zoo does not know stands for itself.
"""
from __future__ import annotations

import html
from collections import defaultdict

from harness.core.verdicts import VERDICTS, Verdict


def rows(records: list[dict]) -> list[tuple[str, int, dict]]:
    """[(class, library classes it stands for, {path: (worst verdict, how many, of how many, max err/bound)})]."""
    by_class: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        cls = (r.get("case") or {}).get("class")
        if cls:
            by_class[cls][r["path"]].append(r)
    out = []
    if by_class:
        from harness.zoo.catalog import members_index

        members = members_index(by_class)
    for cls in sorted(by_class, key=lambda c: c.rpartition(":")[2]):
        cells = {}
        for path, rs in by_class[cls].items():
            order = sorted(rs, key=lambda r: (r["verdict"] == Verdict.PASS, VERDICTS.index(r["verdict"])))
            worst = order[0]["verdict"]
            ratios = [r["max_err_over_tol"] for r in rs if r.get("max_err_over_tol") is not None]
            cells[path] = (worst, sum(1 for r in rs if r["verdict"] == worst), len(rs),
                           max(ratios) if ratios else None)
        out.append((cls, len(members.get(cls) or ()) or 1, cells))
    return out


def _text(cell) -> str:
    if cell is None:
        return ""
    verdict, n, total, ratio = cell
    bound = f" · {ratio:.2g}×" if ratio is not None else ""
    return (f"pass {total}/{total}" if verdict == Verdict.PASS else f"{verdict} {n}/{total}") + bound


def zoo_markdown(records: list[dict], paths: list[str]) -> list[str]:
    """summary.md's section (no lines when no record is a module case's)."""
    table = rows(records)
    if not table:
        return []
    lines = ["", f"## Module cases: implementations × paths ({len(table)} classes, "
             f"{sum(n for _, n, _ in table)} library classes)", "",
             "Each cell: the worst verdict over the class's dtypes and inputs, how many gave it, and the largest "
             "error over the bound.", "", "| class | classes | " + " | ".join(paths) + " |",
             "|---|---|" + "---|" * len(paths)]
    for cls, members, cells in table:
        lines.append(f"| {cls.rpartition(':')[2]} | {members} | " + " | ".join(_text(cells.get(p)) for p in paths)
                     + " |")
    return lines


def zoo_html(records: list[dict], paths: list[str]) -> str:
    """report.html's section (empty when no record is a module case's)."""
    table = rows(records)
    if not table:
        return ""
    e = html.escape
    out = [f"<h2>Module cases: implementations × paths ({len(table)} classes, "
           f"{sum(n for _, n, _ in table)} library classes)</h2>",
           '<table id="zoo"><tr><th>class</th><th>classes</th>' + "".join(f"<th>{e(p)}</th>" for p in paths) + "</tr>"]
    for cls, members, cells in table:
        tds = []
        for p in paths:
            cell = cells.get(p)
            css = "" if cell is None else (Verdict.PASS if cell[0] == Verdict.PASS else "fail")
            tds.append(f'<td class="{css}">{e(_text(cell))}</td>')
        out.append(f'<tr><td title="{e(cls)}">{e(cls.rpartition(":")[2])}</td><td>{members}</td>{"".join(tds)}</tr>')
    out.append("</table>")
    return "\n".join(out)
