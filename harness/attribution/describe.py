"""Attribution in words, for the reports: the first stage over its bound of a record and of a family."""
from __future__ import annotations

from collections import Counter


def _stage_entry(record: dict) -> dict | None:
    name = record.get("first_stage_over")
    return next((e for e in record.get("attribution") or [] if e.get("stage") == name), None)


def first_stage_text(record: dict) -> str:
    """"return:layer_norm.variance (float16, 3.25e+04x its bound)", or why there is none."""
    entry = _stage_entry(record)
    if entry is not None:
        ratio = entry.get("max_err_over_tol")
        size = "non-finite" if ratio is None and entry.get("over") else (f"{ratio:.3g}x its bound" if ratio is not None
                                                                         else f"program: {entry['program_dtype']}")
        approx = ", approximate" if entry.get("approximate") else ""
        return f"{entry['stage']} ({entry['dtype']}, {size}{approx})"
    if record.get("attribution"):
        return "no stage over its bound"
    fact = (record.get("facts") or {}).get("attribution")
    return fact if isinstance(fact, str) and fact.startswith("unavailable") else ""


def family_stage_text(records: list[dict]) -> str:
    """The first stages over their bound among a family's attributed records, most common first."""
    found = Counter()
    attributed = 0
    for r in records:
        if r.get("attribution"):
            attributed += 1
            entry = _stage_entry(r)
            if entry is not None:
                found[f"{entry['stage']} ({entry['dtype']})"] += 1
    if not attributed:
        return "—"
    if not found:
        return f"none over its bound ({attributed} attributed)"
    shown = ", ".join(f"{label} ×{n}" if n > 1 else label for label, n in found.most_common(2))
    more = f", {len(found) - 2} more" if len(found) > 2 else ""
    return f"{shown}{more} ({attributed} attributed)"
