"""The baseline as every report reads it: each record's status, its note, the worst cases; each output's score."""
from __future__ import annotations

import json
import os
from collections import defaultdict
from typing import NamedTuple

from harness.core.verdicts import VERDICTS, Status, Verdict
from harness.reports import baseline as gate

WORST = 20            # worst cases shown with spec and repro command
FAILING_LISTED = 200  # failing executions listed in summary.md


def sort_key(r: dict):
    return (r["case"]["pattern"], r["case"]["dtype"], r["case_id"], r["path"])


def paths_of(records: list[dict]) -> list[str]:
    return sorted({r["path"] for r in records}, key=lambda p: (p != "eager", p))


def badness(r: dict) -> tuple:
    order = {v: i for i, v in enumerate(reversed(VERDICTS))}
    return (-order.get(r["verdict"], 0), -(r.get("max_err_over_tol") or 0.0), r["case_id"], r["path"])


class Known:
    """The baseline as the reports use it: each record's gate status and entry."""

    def __init__(self, baseline: dict | None):
        self.baseline = baseline
        self.entries = baseline or {}

    def entry(self, r: dict):
        """r's baseline entry, unless it names CPU features r's machine lacks."""
        e = self.entries.get((r["case_id"], r["path"]))
        return None if e is not None and e.holds_on(r) is False else e

    def status(self, r: dict) -> str:
        return gate.judge(r, self.entry(r))

    def is_known(self, r: dict) -> bool:
        return self.status(r) == Status.XFAIL

    def note(self, r: dict) -> str:
        e = self.entry(r)
        if self.baseline is None:
            return ""
        if e is None:
            other = self.entries.get((r["case_id"], r["path"]))
            if other is not None:
                return f"new on this CPU (the baseline knows it on CPUs with {' or '.join(other.cpu)})"
            return "new (not in the baseline)"
        if e.flaky:
            return f"flaky ({e.upstream}): {e.reason}"
        if r["verdict"] == e.verdict:
            return f"known ({e.upstream}): {e.reason}"
        return f"baseline expects {e.verdict} ({e.upstream}: {e.reason})"


def worst(records: list[dict], known: Known, n: int = WORST) -> list[dict]:
    """The n worst failing executions: failures not in the baseline first, then by verdict and error/bound."""
    failing = [r for r in records if r["verdict"] != Verdict.PASS]
    return sorted(failing, key=lambda r: (known.is_known(r), badness(r)))[:n]


def spec_file(out_dir: str, r: dict) -> str:
    return os.path.join(out_dir, "cases", f"{r['case_id']}.json")


def repro_command(out_dir: str, r: dict) -> str:
    return f"normdiff repro {spec_file(out_dir, r)} --path {r['path']}"


def fmt(v, spec: str = ".4g") -> str:
    return "-" if v is None else format(v, spec)


def spec_lines(case: dict) -> str:
    """The spec as JSON with one key a line: readable in a table cell, still valid JSON to paste."""
    return "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in case.items()) + "\n}"


def counts_failing(records: list[dict]) -> int:
    return sum(r["verdict"] != Verdict.PASS for r in records)


def cells(records: list[dict]) -> dict[tuple[str, str, str], list[dict]]:
    cells: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for r in records:
        cells[(r["case"]["pattern"], r["case"]["dtype"], r["path"])].append(r)
    return cells


class OutputView(NamedTuple):
    """One output of an execution of several (a record's `outputs`, docs/contracts.md §4) as the reports show it."""
    name: str
    verdict: str
    max_err_over_tol: float | None
    max_abs_err: float | None
    max_ulp: float | None

    @property
    def score(self) -> str:
        """"VERDICT, Rx the bound": the output's one score, short enough for a table cell."""
        return f"{self.verdict}, {fmt(self.max_err_over_tol, '.3g')}x the bound"

    @property
    def text(self) -> str:
        return f"{self.name}: {self.score}"


def output_views(r) -> list[OutputView]:
    """Each output of an execution of several, in order; [] for one output (its record's own keys are its score),
    so a report of one-output records reads as before. Any number of outputs: a program's `return a, b`, a
    gradient case's d_x, d_weight, d_bias."""
    outputs = r.get("outputs")
    if not isinstance(outputs, list) or len(outputs) < 2:
        return []
    return [OutputView(str(o.get("name")), str(o.get("verdict") or "-"), o.get("max_err_over_tol"),
                       o.get("max_abs_err"), o.get("max_ulp")) for o in outputs]


def ratio_text(r, spec: str = ".3g") -> str:
    """A record's error over its bound: the worst output's, then each output's score for several."""
    each = output_views(r)
    worst = fmt(r.get("max_err_over_tol"), spec)
    return worst + (" (" + "; ".join(o.text for o in each) + ")" if each else "")
