"""`run --per-suite`: several named suites as one run, each written out as if it had run alone.

Why: `make nightly` ran each suite in its own `normdiff run`, and each paid
the workers' fixed start (torch, the compilers, Inductor's warm-up: about 15
s at an idle machine's load, docs/measurements.md) and a tail where one core
waits for the other's last compile, five times a night, cold or warm. One
run of them all pays the start once and lets the scheduler spread every
suite's structures over both cores; the gates, `make baseline`, CI and the
history still read each suite's own folder, OUT/SUITE/ (results.jsonl,
summary.md, junit.xml, report.html, cases/), so nothing downstream changes.
OUT/results.jsonl holds the run's every record (what --resume reads).
"""
from __future__ import annotations

import os

from cases.suites import suite
from harness.core.errors import UsageError
from harness.core.records import dumps, write_atomic
from harness.engine.lock import folder_lock
from harness.reports.history import default_history
from harness.spec import CaseSpec


def suites_specs(names: list[str]) -> dict[str, list[CaseSpec]]:
    """Each named suite's specs, in the order named; UsageError naming an unknown suite or a repeated one."""
    out: dict[str, list[CaseSpec]] = {}
    for name in names:
        if name in out:
            raise UsageError(f"--suite: {name} named twice")
        try:
            out[name] = suite(name)
        except KeyError as exc:
            raise UsageError(f"--suite: {exc.args[0]}") from None
    return out


def suite_folder(out_dir: str, name: str) -> str:
    return os.path.join(out_dir, name)


def suite_history(history: str | None, explicit: bool, folder: str) -> str | None:
    """The history a suite's records go to: the run's --history (or none with --no-history), else the suite
    folder's own, as a run into that folder alone would append to."""
    if history is None or explicit:
        return history
    return default_history(folder)


def write_each(out_dir: str, per_suite: dict[str, list[CaseSpec]], records: list[dict],
               write_out) -> dict[str, list[dict]]:
    """Each suite's records (one per execution, those of its cases; a case two suites share goes to both)
    into OUT/SUITE/results.jsonl, sorted by (case_id, path), then `write_out(folder, records)` (its reports and
    history), each folder under its own lock; returns the records per suite."""
    written = {}
    for name, specs in per_suite.items():
        ids = {s.case_id for s in specs}
        mine = sorted((r for r in records if r["case_id"] in ids), key=lambda r: (r["case_id"], r["path"]))
        folder = suite_folder(out_dir, name)
        with folder_lock(folder):
            write_atomic(os.path.join(folder, "results.jsonl"), "".join(dumps(r) + "\n" for r in mine))
            write_out(folder, mine)
        written[name] = mine
    return written
