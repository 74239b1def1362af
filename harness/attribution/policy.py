"""When attribution runs: for new failures, and for every failure on request; decided here, and only here.

Attributing a failure rebuilds the path's graph with its intermediates
exposed (a TVM compile, a to_edge) and re-runs it: seconds per structure.
A failure the baseline already knows (the verdict its entry expects, or any
verdict of a flaky entry) is no news to a nightly, so a run given the
baseline (`run --baseline FILE`) skips it unless asked for every failure
(`run --attribute`). Without a baseline every failure is new. A skipped
record keeps the keys `attribution` and `first_stage_over` (docs/contracts.md §4),
null, and its facts say why. A task may also not ask for it (`Task.attribute`:
fuzz's search and shrinking need verdicts only); `Policy.apply` weighs both.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from harness.attribution.annotate import ATTRIBUTED

from harness.core.records import Attribution, Record

SKIPPED = "skipped: a known failure of the baseline (run --attribute to attribute it)"


@dataclass(frozen=True)
class Policy:
    """`known`: (case_id, path) -> the verdicts the baseline expects of that execution; `every`: attribute all."""

    known: dict = field(default_factory=dict)
    every: bool = False

    def wants(self, record: Record) -> bool:
        """Whether this failing record gets an attribution."""
        if self.every:
            return True
        return record.verdict not in self.known.get(record.key, ())

    def apply(self, record: Record, asked: bool, attribute: Callable[[Record], Record]) -> Record:
        """`record` with its attribution: computed by `attribute` for a wrong output (ATTRIBUTED) its task asks
        for that is news; skipped (null, with a fact) for one the baseline expects; none for anything else."""
        if not asked or record.verdict not in ATTRIBUTED:
            return record
        return attribute(record) if self.wants(record) else self.skip(record)

    def skip(self, record: Record) -> Record:
        """`record` with its attribution skipped, and a fact saying why."""
        return replace(record.with_fact("attribution", SKIPPED), attribution=Attribution(None, None))

    # -- plain data for the workers -------------------------------------------------
    def config(self) -> dict:
        return {"every": self.every, "known": [[c, p, sorted(v)] for (c, p), v in sorted(self.known.items())]}

    @classmethod
    def from_config(cls, cfg: dict | None) -> "Policy":
        if not cfg:
            return cls()
        return cls({(c, p): frozenset(v) for c, p, v in cfg["known"]}, bool(cfg["every"]))
