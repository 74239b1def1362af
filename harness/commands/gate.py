"""`normdiff gate RESULTS --baseline FILE [--subset] [--update]`: the nightly gate (harness.reports.baseline).

The table (every row) is the command's output, on stdout. stderr gets at most
PROBLEM_LINES problem lines and the count of the rest, one line per status,
then the verdict of the gate: a CI log stays readable when a thousand
entries are missing. With --update, stdout gets one line per re-triaged
entry (its verdict changed: upstream and reason from the triage rules) and
stderr the counts.
"""
from __future__ import annotations

import importlib.util
import os
import sys

from harness.core.errors import UsageError
from harness.core.records import latest_per_execution, read_results, write_atomic
from harness.core.verdicts import GATE_FAILS, Status
from harness.reports.baseline import (
    MEANING,
    STATUSES,
    BaselineError,
    case_label,
    classify,
    dump_baseline,
    load_baseline,
    table,
    update,
)


PROBLEM_LINES = 20
PROBLEM_ORDER = (Status.NEW_FAIL, Status.FIXED, Status.MISSING)


def _results_file(arg: str) -> str:
    return os.path.join(arg, "results.jsonl") if os.path.isdir(arg) else arg


def absent_package(entry) -> str | None:
    """The package a baseline entry's module case imports its class from, when it is not installed here (the zoo
    suite's transformers classes, without the zoo extra): such an entry cannot run on this machine, so it is set
    aside, not MISSING. Found, not imported: the gate runs no user code."""
    source = entry.case.get("class")
    if not isinstance(source, str):
        return None
    top = source.split(":")[0].split(".")[0]
    return None if importlib.util.find_spec(top) is not None else top


def cmd_gate(args) -> int:
    results = _results_file(args.results)
    if not os.path.isfile(results):
        raise UsageError(f"gate: no results file {results}")
    try:
        records = latest_per_execution(read_results(results))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"gate: cannot read {results}: {exc}") from None
    try:
        if args.update and not os.path.exists(args.baseline):
            baseline = {}
        else:
            baseline = load_baseline(args.baseline)
    except BaselineError as exc:
        raise UsageError(f"--baseline {exc}") from None

    absent = {k: e for k, e in baseline.items() if absent_package(e)}
    if absent:
        baseline = {k: e for k, e in baseline.items() if k not in absent}
        names = ", ".join(sorted({absent_package(e) for e in absent.values()}))
        print(f"normdiff gate: {len(absent)} baseline entries not judged: their classes' packages are not installed "
              f"({names}); --update keeps them", file=sys.stderr)

    if args.update:
        done = update(records, baseline)
        new = {**done.entries, **absent}
        added = len(new.keys() - baseline.keys() - absent.keys())
        removed = len(baseline.keys() - new.keys())
        write_atomic(args.baseline, dump_baseline(new))
        for t in done.retriaged:  # the command's output: what changed in the entries that stayed
            print(t.line)
        sys.stdout.flush()
        unmatched = sum(not t.matched for t in done.retriaged)
        print(f"normdiff gate: wrote {args.baseline}: {len(new)} known failures ({added} added, {removed} removed, "
              f"{len(done.retriaged)} re-triaged with a new verdict"
              + (f", {unmatched} of them matched by no triage rule: edit their reasons" if unmatched else "")
              + "; the other reasons kept)", file=sys.stderr)
        return 0

    rows = classify(records, baseline, subset=args.subset)
    sys.stdout.write(table(rows, verbose=args.verbose))
    sys.stdout.flush()
    bad = sorted((w for w in rows if w.status in GATE_FAILS), key=lambda w: PROBLEM_ORDER.index(w.status))
    for w in bad[:PROBLEM_LINES]:
        print(f"normdiff gate: {w.status} {w.path} {case_label(w.case, w.case_id)}: {w.note}", file=sys.stderr)
    if len(bad) > PROBLEM_LINES:
        print(f"normdiff gate: … and {len(bad) - PROBLEM_LINES} more problems (every row is in the table "
              "on stdout)", file=sys.stderr)
    counts = {s: sum(w.status == s for w in rows) for s in STATUSES}
    ran = {(r["case_id"], r["path"]) for r in records}
    unjudged = sum(1 for k in baseline if k not in ran)
    for s in STATUSES:
        meaning = MEANING[s]
        if s == Status.MISSING and args.subset:
            meaning = f"not judged (--subset): {unjudged} baseline entries not run"
        elif s == Status.MISSING and counts[s] and counts[s] == len(bad):
            meaning += " (a partial run, a PR job or one shard? --subset judges only what ran)"
        print(f"normdiff gate: {counts[s]:>5} {s:<8} {meaning}", file=sys.stderr)
    print(f"normdiff gate: {len(records)} executions against {len(baseline)} known failures"
          + (" (--subset)" if args.subset else "") + (f": {len(bad)} problems; failing" if bad else ": as expected"),
          file=sys.stderr)
    return 1 if bad else 0


def add_command(subparsers) -> None:
    p = subparsers.add_parser("gate", help="nightly gate: results against the baseline of known failures")
    p.add_argument("results", metavar="RESULTS", help="a results.jsonl file or the folder holding it")
    p.add_argument("--baseline", required=True, metavar="FILE", help="the baseline JSON (reports/baseline.json)")
    p.add_argument("--update", action="store_true",
                   help="rewrite the baseline from the results, keeping upstream reports and reasons; an entry "
                        "whose verdict changed is re-triaged (cases/triage.py) and printed")
    p.add_argument("--subset", action="store_true",
                   help="judge only the baseline entries the results hold (a PR job, one shard): none is MISSING")
    p.add_argument("--verbose", action="store_true", help="list PASS rows in the table too")
    p.set_defaults(func=cmd_gate)
