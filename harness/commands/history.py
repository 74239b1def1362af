"""`normdiff history CASE_ID|FAMILY`: when an execution first failed and last passed, and under what.

Reads the run history that `run` and `merge` append to (harness.reports.history):
--history FILE, else the default output folder's (reports/latest/history.sqlite),
and says on stderr which file it read. stdout gets one line per execution
(case × path) and the library versions of every run it names; `--export
FILE.json` writes the whole answer, replaced atomically. Exit 0 answered, 2 no
history or nothing matching.
"""
from __future__ import annotations

import json
import sys

from harness.core.errors import UsageError
from harness.core.records import json_safe, write_atomic
from harness.core.verdicts import DEFAULT_OUT, Verdict
from harness.reports.history import Answer, Execution, HistoryError, default_history, lookup

LISTED = 20  # executions listed for a family; --export has them all


def _run(answer: Answer, run_id: int | None) -> str:
    if run_id is None:
        return "never"
    run = answer.runs.get(run_id)
    return f"run {run_id} ({run.started[:10]})" if run else f"run {run_id}"


def _line(answer: Answer, ex: Execution) -> str:
    run, verdict, ratio = ex.last
    now = f"{verdict} in run {run}" + (f" ({ratio:.3g}x the bound)" if ratio is not None and verdict != Verdict.PASS else "")
    failing = sum(v != Verdict.PASS for _, v, _ in ex.seen)
    since = f"; failing since {_run(answer, ex.failing_since)}" if ex.failing_since is not None else ""
    return (f"{ex.path} on {ex.label}: {now}; failed in {failing} of {len(ex.seen)} runs; "
            f"first failed: {_run(answer, ex.first_failed)}; last passed: {_run(answer, ex.last_passed)}{since}")


def _versions(versions: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) or "versions not recorded"


def render(answer: Answer, history: str) -> str:
    """The answer as text: a header, one line per execution, then the runs it names with their versions."""
    exs = answer.executions
    if answer.kind == "case":
        head = f"case {exs[0].case_id}: {len(exs)} executions (paths) in {history}"
    else:
        head = (f"family {answer.target!r}: {len(exs)} executions in {history}; matches "
                + "; ".join(answer.families[:5]) + (f" and {len(answer.families) - 5} more" if len(answer.families) > 5 else ""))
        first = [ex.first_failed for ex in exs if ex.first_failed is not None]
        passed = [ex.last_passed for ex in exs if ex.last_passed is not None]
        head += (f"\nfirst failed: {_run(answer, min(first) if first else None)}; "
                 f"last passed: {_run(answer, max(passed) if passed else None)}")
    order = sorted(exs, key=lambda ex: (ex.last[1] == Verdict.PASS, ex.path, ex.label))
    lines = [head] + ["  " + _line(answer, ex) for ex in order[:LISTED]]
    if len(order) > LISTED:
        lines.append(f"  … and {len(order) - LISTED} more (--export FILE.json has them all)")
    named = sorted({r for ex in order[:LISTED] for r in (ex.first_failed, ex.last_passed, ex.failing_since,
                                                         ex.last[0]) if r is not None})
    lines.append("runs:")
    for run_id in named:
        run = answer.runs[run_id]
        lines.append(f"  run {run_id}: {run.started} {run.kind} into {run.out_dir}: {_versions(run.versions)}")
    return "\n".join(lines) + "\n"


def export(answer: Answer, path: str) -> str:
    data = {"target": answer.target, "kind": answer.kind, "families": answer.families,
            "executions": [{"case_id": ex.case_id, "path": ex.path, "label": ex.label, "family": ex.family,
                            "first_failed": ex.first_failed, "last_passed": ex.last_passed,
                            "failing_since": ex.failing_since,
                            "runs": [{"run_id": r, "verdict": v, "max_err_over_tol": x} for r, v, x in ex.seen]}
                           for ex in answer.executions],
            "runs": {str(k): vars(v) for k, v in sorted(answer.runs.items())
                     if any(k == r for ex in answer.executions for r, _, _ in ex.seen)}}
    return write_atomic(path, json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n")


def cmd_history(args) -> int:
    try:
        answer = lookup(args.history, args.target)
        if args.export:
            export(answer, args.export)
    except HistoryError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"--export: cannot write {args.export} ({exc.strerror})") from None
    print(f"normdiff: read the run history {args.history}", file=sys.stderr)
    sys.stdout.write(render(answer, args.history))
    return 0


def add_command(subparsers) -> None:
    p = subparsers.add_parser("history", help="when a case or a bug family first failed and last passed")
    p.add_argument("target", metavar="CASE_ID|FAMILY",
                   help="a case_id (or its first 4+ digits), or a family: an upstream report or words of its reason")
    p.add_argument("--history", default=default_history(DEFAULT_OUT), metavar="PATH",
                   help=f"the history file (default {default_history(DEFAULT_OUT)}: the one a run or merge "
                        f"into the default output folder writes)")
    p.add_argument("--export", metavar="FILE.json", help="also write the whole answer as JSON")
    p.set_defaults(func=cmd_history)
