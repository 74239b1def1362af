"""`normdiff bugs [--check | --drafts DIR]`: the catalog of known upstream bugs, and whether each still shows.

`--drafts DIR` writes a bug report (harness.repro.report) for every entry
not reported upstream yet, one folder each.

Listing prints one entry a line (data, on stdout). `--check` runs every
entry's executions (and its controls) through the real paths in warm,
isolated workers (harness.engine.run.Runner), then the entry's full and short
repro scripts (harness.repro.entry_scripts), all in one fresh interpreter per
job (harness.repro.run_scripts), and prints `reproduced`, `fixed` or `changed`
per entry with both scripts' exit codes; exit 0 when every entry behaves as
recorded (cases/bugs.py `expect`) and both its scripts exit as recorded (1
while the bug shows, 0 once fixed), 1 otherwise. An entry whose class's package
is not installed (the zoo's findings without transformers) is skipped, and says
so.
"""
from __future__ import annotations

import os
import sys
import tempfile

from cases import bugs
from harness.core.errors import UsageError
from harness.core.records import ResultsWriter
from harness.core.records import static_scope
from harness.core.verdicts import DEFAULT_TIMEOUT, Verdict
from harness.engine.plan import Task
from harness.engine.procs import RunnerError
from harness.engine.run import execute_tasks
from harness.modules import LIFT
from harness.repro import entry_scripts
from harness.repro.run_scripts import run_scripts


def _select(names: list[str] | None):
    if not names:
        return list(bugs.BUGS)
    out = []
    for name in names:
        try:
            out.append(bugs.get(name))
        except KeyError as exc:
            raise UsageError(f"--id: {exc.args[0]}") from None
    return out


def cmd_list(entries) -> int:
    width = max(len(b.id) for b in entries)
    print(f"{'id':<{width}}  {'expect':<10}  {'bug verdict':<14}  paths  link")
    for b in entries:
        where = ",".join(b.paths)
        print(f"{b.id:<{width}}  {b.expect:<10}  {b.verdict:<14}  {where}  {b.link or '(not reported)'}"
              + (f"  [{b.scope}]" if b.scope else ""))
        print(f"{'':<{width}}  {b.title}")
    return 0


def _records(entries, jobs: int, timeout: float, out_dir: str | None, scripts: bool = True) -> dict:
    """(case_id, path) -> record for every execution the entries need (with `scripts`, a module case's LIFT
    too: its scripts are written from it)."""
    tasks: dict[tuple[str, str], Task] = {}
    for b in entries:
        lift = [(s, LIFT) for s, _ in [entry_scripts.case(b)] if s.is_module and scripts]
        for spec, path in [*b.checks, *b.controls, *lift]:
            tasks.setdefault((spec.case_id, path), Task(spec, path))
    records: dict[tuple[str, str], dict] = {}
    writer = None
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        target = os.path.join(out_dir, "results.jsonl")
        if os.path.exists(target):
            os.remove(target)
        writer = ResultsWriter(target)

    def on_record(record: dict) -> None:
        records[(record["case_id"], record["path"])] = record
        if writer and record["path"] != LIFT:
            writer.write(record)

    try:
        execute_tasks(list(tasks.values()), on_record, jobs=jobs, timeout=timeout)
    finally:
        if writer:
            writer.close()
    return records


def status(bug, records: dict) -> tuple[str, list[str]]:
    """("reproduced" | "fixed" | "changed", the executions that do not fit)."""
    def verdict(spec, path):
        r = records.get((spec.case_id, path))
        return (r or {}).get("verdict", "missing"), r

    off = []
    for spec, path in bug.controls:
        v, r = verdict(spec, path)
        if v != Verdict.PASS:
            off.append(f"control {path} on {spec}: {v} ({(r or {}).get('message', '')[:160]})")
    seen = [verdict(s, p) + (s, p) for s, p in bug.checks]
    if all(v == bug.verdict for v, *_ in seen):
        state = "reproduced"
        for v, r, s, p in seen:  # a symbolic entry: the same size compiled statically passes, or fails too
            if bug.scope is not None and static_scope(r) != bug.scope:
                off.append(f"{p} on {s}: {static_scope(r)}, not {bug.scope} ({r.get('static_control')})")
    elif all(v == Verdict.PASS for v, *_ in seen):
        state = "fixed"
    else:
        state = "changed"
        for v, r, s, p in seen:
            if v not in (bug.verdict, Verdict.PASS):
                off.append(f"{p} on {s}: {v} ({(r or {}).get('message', '')[:160]})")
    if off:
        state = "changed"
    return state, off


def missing(bug) -> list[str]:
    """The packages an entry needs that are not installed (found, not imported)."""
    import importlib.util

    return [p for p in bug.needs if importlib.util.find_spec(p) is None]


def _run(execute, *args) -> dict | int:
    """`execute(*args)`'s records, or the exit status where the workers fail (1) or the user interrupts (130),
    said in one line: --check's and --drafts's executions end the same way."""
    try:
        return execute(*args)
    except RunnerError as exc:
        print(f"normdiff: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("normdiff: interrupted", file=sys.stderr)
        return 130


def scripts_exit(entries, records: dict, jobs: int, folder: str) -> dict[str, tuple[int, int, int]]:
    """bug id -> (the full script's exit code, the short script's, the code both should give), each entry's two
    scripts written into `folder` and run there, all in a few fresh interpreters."""
    written = []
    for b in entries:
        spec, _ = entry_scripts.case(b)
        lift = records.get((spec.case_id, LIFT)) if spec.is_module else None
        if spec.is_module and (lift is None or lift["verdict"] != Verdict.PASS):
            continue  # the class did not resolve: the execution's own record says so
        written.append(entry_scripts.write_scripts(b, folder, lift))
    ran = run_scripts([p for w in written for p in (w.full, w.short)], jobs=max(1, jobs))
    return {w.id: (ran[w.full].code, ran[w.short].code, w.expected) for w in written}


def _scripts_note(exits: tuple[int, int, int] | None) -> tuple[str, bool]:
    """(what an entry's scripts did, whether both exit as recorded)."""
    if exits is None:
        return "scripts: not written (the class did not resolve)", False
    full, short, expected = exits
    ok = full == short == expected
    return f"scripts: full exits {full}, short exits {short}" + ("" if ok else f" (recorded: {expected})"), ok


def cmd_check(entries, args) -> int:
    skipped = {b.id: missing(b) for b in entries if missing(b)}
    checked = [b for b in entries if b.id not in skipped]
    scripts = getattr(args, "scripts", True)
    records = _run(_records, checked, args.jobs, args.timeout, args.out, scripts)
    if isinstance(records, int):
        return records
    if args.out and scripts:
        os.makedirs(os.path.join(args.out, "scripts"), exist_ok=True)
    exits = None
    if scripts:
        with tempfile.TemporaryDirectory(prefix="normdiff-bugs-") as tmp:
            folder = os.path.join(args.out, "scripts") if args.out else tmp
            exits = _run(scripts_exit, checked, records, args.jobs, folder)
        if isinstance(exits, int):
            return exits
    width = max(len(b.id) for b in entries)
    unexpected = 0
    for b in entries:
        if b.id in skipped:
            print(f"{b.id:<{width}}  {'skipped':<10}  (needs {', '.join(skipped[b.id])}: "
                  f"pip install 'normdiff[zoo]')", flush=True)
            continue
        state, off = status(b, records)
        said, agree = _scripts_note(exits.get(b.id)) if exits is not None else ("", True)
        note = "as recorded" if state == b.expect else f"recorded: {b.expect}"
        print(f"{b.id:<{width}}  {state:<10}  ({note})  {said}".rstrip(), flush=True)
        for line in off:
            print(f"{'':<{width}}    {line}")
        unexpected += state != b.expect or not agree
    if unexpected:
        print(f"normdiff: {unexpected} of {len(entries)} catalog entries differ from the record (their verdict or "
              "their scripts' exit); update cases/bugs.py if upstream fixed or changed them", file=sys.stderr)
        return 1
    print(f"normdiff: all {len(checked)} catalog entries checked behave as recorded"
          + (", and so do their full and short scripts" if exits is not None else "")
          + (f" ({len(skipped)} skipped)" if skipped else ""), file=sys.stderr)
    return 0


def new_entries(entries) -> list:
    """The entries of findings not reported upstream yet (`-new-` in their id, docs/findings.md's `new`)."""
    return [b for b in entries if "-new-" in b.id]


def cmd_drafts(entries, args) -> int:
    """--drafts DIR: DIR/ID/report.md and its scripts for every `new` entry; exit 0 when every short script
    exits 1 (the bug shows), 1 otherwise. Their executions run together in warm workers first."""
    from harness.repro import report

    chosen = new_entries(entries) if not args.id else entries
    drafts, skipped = [], {}
    for b in chosen:
        if missing(b):
            skipped[b.id] = missing(b)
            continue
        drafts.append(report.plan(b.id, None, "", args.timeout))
    records = _run(report.run_drafts, drafts, args.jobs, args.timeout)
    if isinstance(records, int):
        return records
    width = max([len(b.id) for b in chosen] or [0])
    bad = 0
    for b in chosen:
        if b.id in skipped:
            print(f"{b.id:<{width}}  skipped (needs {', '.join(skipped[b.id])})", flush=True)
            continue
        draft = next(d for d in drafts if d.target == b.id)
        try:
            written, code, lines = report.write_draft(draft, records, os.path.join(args.drafts, b.id))
        except UsageError as exc:  # the entry passes now: no report, and it counts
            print(f"{b.id:<{width}}  no report: {exc}", flush=True)
            bad += 1
            continue
        print(f"{b.id:<{width}}  {written}  (short script: {lines} lines, exits {code})", flush=True)
        bad += code != 1
    print(f"normdiff: {len(drafts) - bad} of {len(drafts)} reports written whose short script exits 1"
          + (f" ({len(skipped)} skipped)" if skipped else ""), file=sys.stderr)
    return 1 if bad else 0


def cmd_bugs(args) -> int:
    if args.jobs is not None and args.jobs < 0:
        raise UsageError(f"--jobs: must be >= 0, got {args.jobs}")
    if args.timeout <= 0:
        raise UsageError(f"--timeout: must be > 0, got {args.timeout}")
    if args.jobs is None:
        args.jobs = os.cpu_count() or 1
    entries = _select(args.id)
    if args.drafts:
        if args.check:
            raise UsageError("--drafts and --check: one at a time")
        return cmd_drafts(entries, args)
    return cmd_check(entries, args) if args.check else cmd_list(entries)


def add_command(subparsers) -> None:
    p = subparsers.add_parser("bugs", help="the catalog of known upstream bugs; --check runs each")
    p.add_argument("--check", action="store_true",
                   help="run every entry and its full and short scripts; say reproduced / fixed and how each "
                        "script exits (exit 0 when all are as recorded)")
    p.add_argument("--id", action="append", metavar="BUG-ID", help="only this entry (repeatable)")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: cores; 0 = in-process)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"seconds per execution (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("--no-scripts", dest="scripts", action="store_false",
                   help="--check: run the entries' executions only, not their full and short scripts")
    p.add_argument("--out", metavar="DIR", help="also write the check's records to DIR/results.jsonl and the scripts "
                                                "it ran to DIR/scripts/ (each beside its output, SCRIPT.out)")
    p.add_argument("--drafts", metavar="DIR",
                   help="write DIR/ID/report.md with its short and full scripts for every `new` entry (or the "
                        "--id ones); exit 0 when every short script exits 1")
    p.set_defaults(func=cmd_bugs)
