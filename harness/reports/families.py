"""Bug families: failing executions grouped by the upstream report or triage reason they share.

A thousand known failures listed one by one hide the dozen bugs behind them.
A record's family is its baseline entry's upstream report and reason; for a
record not in the baseline, the first triage rule that matches it
(cases/triage.py); else "untriaged: <verdict>". Each family keeps its
simplest case (fewest elements), the one to paste into an upstream report.
"""
from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass, field

from cases.triage import triage
from harness.core.records import static_scope
from harness.core.verdicts import Status, Verdict
from harness.reports.known import Known, badness


def family_of(record: dict, known: Known) -> tuple[str | None, str]:
    """(upstream, reason) of a failing record: its baseline entry's, a triage rule's, or untriaged."""
    entry = known.entry(record)
    if entry is not None:
        return entry.upstream, entry.reason
    rule = triage(record)
    if rule:
        return rule
    return None, f"untriaged: {record['verdict']}"


def family_label(upstream: str | None, reason: str) -> str:
    return f"{upstream}: {reason}" if upstream else reason


def family_slug(label: str) -> str:
    """A short stable id for a family (HTML filters, URLs): f- and 8 hex digits of its label."""
    return "f-" + hashlib.sha1(label.encode("utf-8")).hexdigest()[:8]


def elements(case: dict) -> int:
    return math.prod(int(d) for d in case.get("shape") or [1])


@dataclass
class Family:
    upstream: str | None
    reason: str
    records: list[dict] = field(default_factory=list)

    @property
    def label(self) -> str:
        return family_label(self.upstream, self.reason)

    @property
    def slug(self) -> str:
        return family_slug(self.label)

    @property
    def scope(self) -> str:
        """Of symbolic failures (docs/shapes.md): "symbolic only" or "also static" by their static controls, each
        counted when both occur; "" for a family of static executions."""
        counts = Counter(s for s in map(static_scope, self.records) if s)
        return next(iter(counts)) if len(counts) == 1 else ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))

    @property
    def shown(self) -> str:
        """The label as the reports show it: with the scope of its symbolic failures, if any."""
        return f"{self.label} [{self.scope}]" if self.scope else self.label

    def _values(self, key: str) -> list[str]:
        return sorted({str(r["case"].get(key)) for r in self.records})

    @property
    def paths(self) -> list[str]:
        return sorted({r["path"] for r in self.records})

    @property
    def dtypes(self) -> list[str]:
        return self._values("dtype")

    @property
    def patterns(self) -> list[str]:
        return self._values("pattern")

    @property
    def verdicts(self) -> Counter:
        return Counter(r["verdict"] for r in self.records)

    @property
    def simplest(self) -> dict:
        """The execution with the fewest input elements (ties: the worse one, then case_id)."""
        return min(self.records, key=lambda r: (elements(r["case"]), badness(r)))

    @property
    def worst_ratio(self) -> float | None:
        vals = [r["max_err_over_tol"] for r in self.records if r.get("max_err_over_tol") is not None]
        return max(vals) if vals else None


def families(records: list[dict], known: Known) -> list[Family]:
    """The families of the failing (non-pass) records: those with a failure new to the baseline
    first (what a reader must act on), each part largest first."""
    table: dict[tuple[str | None, str], Family] = {}
    for r in records:
        if r["verdict"] == Verdict.PASS:
            continue
        key = family_of(r, known)
        table.setdefault(key, Family(*key)).records.append(r)
    def new(f: Family) -> bool:
        return any(known.status(r) == Status.NEW_FAIL for r in f.records)

    return sorted(table.values(), key=lambda f: (not new(f), -len(f.records), f.label))


def verdict_shown(record: dict) -> str:
    """A failing record's verdict as the reports show it: a symbolic failure's with its scope."""
    scope = static_scope(record)
    return f"{record['verdict']} ({scope})" if scope else str(record["verdict"])


def slug_of(record: dict, known: Known) -> str:
    return family_slug(family_label(*family_of(record, known)))
