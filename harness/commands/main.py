"""The command line (DESIGN §5): `normdiff COMMAND …`, same as `python -m harness …`.

Bad usage or a bad spec is one line on stderr and exit 2, checked before
anything is written. Data goes to files; messages go to stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

DEFAULT_OUT = os.path.join("reports", "latest")


class UsageError(Exception):
    """Bad usage: one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


def _paths_arg(text: str | None) -> list[str]:
    from harness import paths

    if text is None:
        return paths.default_names()
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise UsageError("--paths: no path named")
    known = paths.names()
    for n in names:
        if n not in known:
            raise UsageError(f"--paths: unknown path {n!r}; known: {', '.join(known)}")
    return list(dict.fromkeys(names))


def _shard_arg(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        k, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard: expected K/N like 2/4, got {text!r}") from None
    if not (n >= 1 and 1 <= k <= n):
        raise UsageError(f"--shard: need 1 <= K <= N, got {text!r}")
    return k, n


def _load_specs(args) -> list:
    from cases.suites import suite
    from harness.core.spec import SpecError, load_spec_file

    specs = []
    suites = args.suite or ([] if args.case else ["smoke"])
    for name in suites:
        try:
            specs += suite(name)
        except KeyError as exc:
            raise UsageError(f"--suite: {exc.args[0]}") from None
    for path in args.case or []:
        try:
            specs += load_spec_file(path)
        except SpecError as exc:
            raise UsageError(str(exc)) from None
    unique = {}
    for s in specs:
        unique.setdefault(s.case_id, s)
    return list(unique.values())


def cmd_run(args) -> int:
    from harness.core.records import latest_per_execution, read_results
    from harness.engine.run import RunnerError, run, shard

    specs = _load_specs(args)
    path_names = _paths_arg(args.paths)
    part = _shard_arg(args.shard)
    if args.jobs is not None and args.jobs < 0:
        raise UsageError(f"--jobs: must be >= 0, got {args.jobs}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout: must be > 0, got {args.timeout}")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out: {args.out} exists and is not a folder")
    if part:
        specs = shard(specs, *part)
    results = os.path.join(args.out, "results.jsonl")
    try:
        run(specs, path_names, args.out, jobs=args.jobs, timeout=args.timeout,
            resume=args.resume, progress=not args.quiet)
    except KeyboardInterrupt:
        kept = len(read_results(results)) if os.path.exists(results) else 0
        _report(args.out)
        print(f"normdiff: interrupted; {kept} records kept in {results}; "
              "run again with --resume to finish", file=sys.stderr)
        return 130
    except RunnerError as exc:
        _report(args.out)
        print(f"normdiff: error: {exc}", file=sys.stderr)
        return 1
    _report(args.out)
    wanted = {(s.case_id, p) for s in specs for p in path_names}
    mine = [r for r in latest_per_execution(read_results(results)) if (r["case_id"], r["path"]) in wanted]
    bad = [r for r in mine if r["verdict"] != "pass"]
    missing = len(wanted) - len(mine)
    print(f"normdiff: {len(mine)} executions, {len(bad)} not passing"
          + (f", {missing} missing" if missing else "") + f"; reports in {args.out}", file=sys.stderr)
    return 1 if bad or missing else 0


def _report(out_dir: str) -> list[dict]:
    """The reports of everything results.jsonl in `out_dir` holds (one record per execution)."""
    from harness.reports.write import write_reports
    from harness.core.records import latest_per_execution, read_results

    path = os.path.join(out_dir, "results.jsonl")
    records = latest_per_execution(read_results(path)) if os.path.exists(path) else []
    write_reports(records, out_dir)
    return records


def cmd_cases(args) -> int:
    from cases.suites import suite

    try:
        specs = suite(args.suite)
    except KeyError as exc:
        raise UsageError(f"--suite: {exc.args[0]}") from None
    out = sys.stdout
    for s in specs:
        out.write(s.to_json() + "\n")
    return 0


def cmd_merge(args) -> int:
    """One results file (sorted by case_id, path) and its reports from shard outputs."""
    from harness.core.records import ResultsWriter, latest_per_execution, read_results

    records = []
    for d in args.dirs:
        path = os.path.join(d, "results.jsonl") if os.path.isdir(d) else d
        if not os.path.isfile(path):
            raise UsageError(f"merge: no results.jsonl in {d}")
        try:
            records += read_results(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"merge: cannot read {path}: {exc}") from None
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out: {args.out} exists and is not a folder")
    merged = sorted(latest_per_execution(records), key=lambda r: (r["case_id"], r["path"]))
    os.makedirs(args.out, exist_ok=True)
    target = os.path.join(args.out, "results.jsonl")
    tmp = target + ".tmp"
    if os.path.exists(tmp):
        os.remove(tmp)
    with ResultsWriter(tmp) as w:
        for r in merged:
            w.write(r)
    os.replace(tmp, target)  # an input may be the output folder: read everything first
    _report(args.out)
    repeated = len(records) - len(merged)
    print(f"normdiff: merged {len(merged)} records from {len(args.dirs)} inputs into {args.out}"
          + (f" ({repeated} repeated executions: the last one read kept)" if repeated else ""),
          file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="normdiff", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    p = sub.add_parser("run", help="run cases × paths, write results.jsonl and reports")
    p.add_argument("--suite", action="append", help="a named suite (repeatable); default smoke")
    p.add_argument("--case", nargs="+", action="extend", metavar="FILE.json",
                   help="spec files: a JSON object, a JSON list, or JSON lines")
    p.add_argument("--paths", help="comma-separated path names (default: every registered path)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: cores; 0 = in-process)")
    p.add_argument("--shard", help="run part K of N (by case_id), e.g. 2/4")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per execution (default 300)")
    p.add_argument("--resume", action="store_true", help="skip executions already in results.jsonl")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("cases", help="print a suite's specs as JSON lines")
    p.add_argument("--suite", required=True)
    p.set_defaults(func=cmd_cases)

    p = sub.add_parser("merge", help="combine shard outputs into one results file and reports")
    p.add_argument("dirs", nargs="+", metavar="DIR")
    p.add_argument("--out", default=DEFAULT_OUT)
    p.set_defaults(func=cmd_merge)

    for extra in _extra_commands():
        extra(sub)
    return parser


def _extra_commands():
    """Commands defined in their own modules (gate, fuzz, repro, bugs), when present."""
    import importlib

    found = []
    for module in ("harness.reports.baseline", "harness.search.fuzzer", "harness.repro.resolve", "harness.commands.bugs"):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue
            raise
        found.append(mod.add_command)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            raise UsageError("a command is required: " + ", ".join(sorted(parser._subparsers._group_actions[0].choices)))
        return args.func(args)
    except UsageError as exc:
        print(f"normdiff: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
