"""Module cases resolved in workers before any path runs (docs/contracts.md §8).

Each module structure is imported, built, exported and lifted once, on the
run's own workers (a class is user code: never in this process), under the
pseudo path LIFT. A class that cannot be found or built is a bad spec: the
run stops with one line naming it, before anything is written. A class whose
graph holds an op the language cannot is one line too when it is the run's
only case; inside a suite each of its executions is `unsupported` with that
reason. A class that crashes, hangs or outgrows --max-memory while it is
resolved costs its executions, not the run: each gets that verdict.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from harness.core.errors import UsageError
from harness.core.records import Record
from harness.core.verdicts import Verdict
from harness.engine.plan import Task
from harness.modules import LIFT


def lift_tasks(specs) -> list[Task]:
    """One LIFT task per module structure (its first case)."""
    firsts = {}
    for s in specs:
        if s.is_module:
            firsts.setdefault(s.structure_key(), s)
    return [Task(s, LIFT) for s in firsts.values()]


def preflight(specs, execute: Callable[[list[Task], Callable[[Record], None]], None], *,
              single: bool, digests: dict[str, str] | None = None) -> dict[str, Record]:
    """{structure key: its LIFT record} of every module structure that did not resolve; UsageError (exit 2)
    for a bad spec, or for an op outside the language when `single` (the run's only case). `digests`, if
    given, receives {structure key: module digest} of those that did: what their artifacts' cache keys
    hold, so the run can tell which it will restore rather than compile."""
    tasks = lift_tasks(specs)
    if not tasks:
        return {}
    by_case = {t.spec.case_id: t.spec.structure_key() for t in tasks}
    failed: dict[str, Record] = {}

    def on_record(record: Record) -> None:
        if record.verdict != Verdict.PASS:
            failed[by_case[record.case_id]] = record
        elif digests is not None and record.resolution is not None and record.resolution.module_digest:
            digests[by_case[record.case_id]] = record.resolution.module_digest

    execute(tasks, on_record)
    for record in failed.values():
        if record.verdict == Verdict.ERROR and record.stage == "spec":
            raise UsageError(record.message)
        if single and record.verdict == Verdict.UNSUPPORTED:
            raise UsageError(record.message)
    return failed


def unresolved_record(base: Record, lift_record: Record) -> Record:
    """An execution of a case whose module did not resolve: the resolution's verdict, at stage `lift` for a
    crash, a hang or an error of its own, with the memory limit that refused its allocation, if one did."""
    stage, message = lift_record.stage, lift_record.message or ""
    if lift_record.verdict in (Verdict.CRASH, Verdict.TIMEOUT):
        stage, message = "lift", f"while importing, building or exporting the class: {message}"
    return replace(base, verdict=lift_record.verdict, stage=stage, message=message, seconds=0.0,
                   memory_limit_gb=lift_record.memory_limit_gb)
