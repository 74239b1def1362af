"""`normdiff run`, `cases` and `merge`: cases × paths into results.jsonl, its reports and the run history.

A run holds the lock on its output folder from the first check to the last
report (a second run into it exits 2 naming the pid that writes it); merge
takes the same lock. Both append what they end with to the run history
(OUT/history.sqlite unless --history PATH or --no-history, so a run from any
folder writes nothing outside OUT and the artifact cache), and report.html's
pass rates read that same file: results.jsonl stays the primary output, and a
history that cannot be written is a warning.
"""
from __future__ import annotations

import os
import sys

from cases.suites import suite, suite_notes
from harness.commands.common import load_specs, paths_arg, results_records, shard_arg
from harness.commands.module_args import add_module_options, module_spec
from harness.commands.run_suites import suite_folder, suite_history, suites_specs, write_each
from harness.core.errors import UsageError
from harness.core.machine import cpu_features
from harness.core.records import dumps, latest_per_execution, read_results, write_atomic
from harness.attribution.policy import Policy
from harness.core.verdicts import DEFAULT_OUT, DEFAULT_TIMEOUT, Status, Verdict
from harness.engine.cache import DEFAULT_MAX_GB, MAX_GB_ENV, ArtifactCache, default_dir, max_bytes_from_env
from harness.engine import ray_executor
from harness.engine.lock import folder_lock
from harness.engine.plan import shard
from harness.engine.procs import RunnerError
from harness.engine.run import run
from harness.oracle.twins import program_twin
from harness.reports import baseline as gate
from harness.reports.history import HISTORY_FILE, HistoryError, append, default_history, pass_rates
from harness.reports.write import write_reports


def _history_arg(args) -> str | None:
    """The history file this run or merge appends to: --history, else the one in its --out folder."""
    if args.no_history:
        return None
    history = args.history or default_history(args.out)
    if os.path.isdir(history):
        raise UsageError(f"--history: {history} is a folder, not a history file")
    return history


def cmd_run(args) -> int:
    per_suite = None
    if args.per_suite:
        if not args.suite or args.case or args.cls:
            raise UsageError("--per-suite: needs --suite (repeatable), and no --case or --class")
        per_suite = suites_specs(args.suite)
        specs = list({s.case_id: s for specs in per_suite.values() for s in specs}.values())
    else:
        specs = load_specs(args.suite, args.case, default=None if args.cls else "smoke")
    if args.cls:
        spec = module_spec(args.cls, args)
        specs += [spec] if spec.case_id not in {s.case_id for s in specs} else []
    path_names = paths_arg(args.paths)
    part = shard_arg(args.shard)
    if args.jobs is not None and args.jobs < 0:
        raise UsageError(f"--jobs: must be >= 0, got {args.jobs}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout: must be > 0, got {args.timeout}")
    if args.max_memory is not None and not args.max_memory > 0:
        raise UsageError(f"--max-memory: must be > 0 GB, got {args.max_memory:g}")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out: {args.out} exists and is not a folder")
    history = _history_arg(args)
    if part:
        specs = shard(specs, *part)
    results = os.path.join(args.out, "results.jsonl")
    cache = cache_arg(args)
    jobs = executor_arg(args)
    policy = policy_arg(args)
    wanted = {(s.case_id, p) for s in specs for p in path_names}
    mine: list[dict] = []

    def finish(finished: bool) -> None:  # under the run's folder lock (harness.engine.run)
        if finished:
            mine.extend(r for r in latest_per_execution(read_results(results)) if (r["case_id"], r["path"]) in wanted)
        if per_suite is None:
            if finished:
                _record_history(history, mine, "run", args.out)
            _report(args.out, history)
            return
        done = mine if finished else results_records(args.out)

        def write_out(folder: str, records: list[dict]) -> None:
            hist = suite_history(history, bool(args.history), folder)
            if finished:
                _record_history(hist, records, "run", folder)
            _report(folder, hist, records)
        write_each(args.out, per_suite, done, write_out)

    try:
        run(specs, path_names, args.out, jobs=jobs, timeout=args.timeout,
            resume=args.resume, progress=not args.quiet, max_memory=args.max_memory, cache=cache,
            executor=args.executor, address=args.address, policy=policy, finish=finish)
    except KeyboardInterrupt:
        kept = len(read_results(results)) if os.path.exists(results) else 0
        print(f"normdiff: interrupted; {kept} records kept in {results}; "
              "run again with --resume to finish", file=sys.stderr)
        return 130
    except RunnerError as exc:
        print(f"normdiff: error: {exc}", file=sys.stderr)
        return 1
    bad = [r for r in mine if r["verdict"] != Verdict.PASS]
    missing = len(wanted) - len(mine)
    where = args.out if per_suite is None else ", ".join(suite_folder(args.out, n) for n in per_suite)
    print(f"normdiff: {len(mine)} executions, {len(bad)} not passing"
          + (f", {missing} missing" if missing else "") + f"; reports in {where}", file=sys.stderr)
    return 1 if bad or missing else 0


def cache_arg(args) -> ArtifactCache | None:
    """The persistent artifact cache `--cache DIR` / `--no-cache` ask for (default: the user cache folder)."""
    if args.no_cache:
        return None
    root = args.cache or default_dir()
    if os.path.exists(root) and not os.path.isdir(root):
        raise UsageError(f"--cache: {root} exists and is not a folder")
    return ArtifactCache(root, max_bytes_from_env())


def policy_arg(args) -> Policy:
    """Which failures get an attribution and a static control: every one with --attribute or without --baseline,
    else those the baseline does not expect (the gate's own judgement of each verdict: not XFAIL, not FLAKY).
    Every failing verdict is weighed, not only the attributed ones: a symbolic `error` the baseline expects
    (TVM's float16 literal at 70,000) got a static compile per size on every night otherwise."""
    if args.attribute or not args.baseline:
        return Policy(every=args.attribute)
    known: dict = {}
    here = cpu_features()  # an entry of other CPUs' failures is not known here
    for path in args.baseline:  # several (one per suite of a --per-suite run): what any of them expects
        try:
            entries = gate.load_baseline(path)
        except gate.BaselineError as exc:
            raise UsageError(f"--baseline {exc}") from None
        for entry in entries.values():
            expected = frozenset(v for v in Verdict if v != Verdict.PASS
                                 and gate.judge({"verdict": v, "cpu": here}, entry) in (Status.XFAIL, Status.FLAKY))
            if expected:
                known[entry.key] = known.get(entry.key, frozenset()) | expected
    return Policy(known)


def executor_arg(args) -> int | None:
    """Check --executor/--address; the jobs to ask for (None: the engine's default, harness.engine.run)."""
    if args.address and args.executor != "ray":
        raise UsageError("--address: only with --executor ray")
    if args.executor == "ray":
        ray_executor.require()
    return args.jobs


def _record_history(history: str | None, records: list[dict], kind: str, out_dir: str) -> None:
    """Append a finished run to the history; a history that cannot be written is a warning, not a failure."""
    if not history or not records:
        return
    try:
        append(history, records, kind=kind, out_dir=out_dir, baseline=gate.default_baseline())
    except HistoryError as exc:
        print(f"normdiff: warning: run history not recorded: {exc}", file=sys.stderr)


def _report(out_dir: str, history: str | None = None, records: list[dict] | None = None) -> list[dict]:
    """The reports of everything results.jsonl in `out_dir` holds (one record per execution), read from it
    unless the caller has just written those `records` there (merge: not read a second time)."""
    if records is None:
        records = results_records(out_dir)
    rates = None
    if history:
        try:
            rates = pass_rates(history)
        except HistoryError as exc:
            print(f"normdiff: warning: pass rates not shown: {exc}", file=sys.stderr)
    write_reports(records, out_dir, history=rates)
    return records


def cmd_cases(args) -> int:
    try:
        specs = suite(args.suite)
    except KeyError as exc:
        raise UsageError(f"--suite: {exc.args[0]}") from None
    for note in suite_notes(args.suite):  # what the suite leaves out, and why: nothing is dropped silently
        print(f"normdiff: {args.suite}: {note}", file=sys.stderr)
    out = sys.stdout
    for s in specs:
        if args.programs:
            s = program_twin(s) or s
        out.write(s.to_json() + "\n")
    return 0


def cmd_merge(args) -> int:
    """One results file (sorted by case_id, path) and its reports from shard outputs."""
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
    history = _history_arg(args)
    merged = sorted(latest_per_execution(records), key=lambda r: (r["case_id"], r["path"]))
    with folder_lock(args.out):
        # an input may be the output folder: everything was read first
        write_atomic(os.path.join(args.out, "results.jsonl"), "".join(dumps(r) + "\n" for r in merged))
        _record_history(history, merged, "merge", args.out)
        _report(args.out, history, merged)
    repeated = len(records) - len(merged)
    print(f"normdiff: merged {len(merged)} records from {len(args.dirs)} inputs into {args.out}"
          + (f" ({repeated} repeated executions: the last one read kept)" if repeated else ""),
          file=sys.stderr)
    return 0


def _history_options(p) -> None:
    p.add_argument("--history", metavar="PATH",
                   help=f"append the records to this run history (default OUT/{HISTORY_FILE}, in the --out folder)")
    p.add_argument("--no-history", action="store_true", help="do not record the run in the history")


def add_command(subparsers) -> None:
    p = subparsers.add_parser("run", help="run cases × paths, write results.jsonl and reports")
    p.add_argument("--suite", action="append", help="a named suite (repeatable); default smoke")
    p.add_argument("--case", nargs="+", action="extend", metavar="FILE.json",
                   help="spec files: a JSON object, a JSON list, or JSON lines")
    p.add_argument("--paths",
                   help="comma-separated path names (default: every built-in path; plug-in paths when named)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: cores; 0 = in-process)")
    p.add_argument("--shard", help="run part K of N, e.g. 2/4 (a case's structure stays in one part)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"seconds per execution (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("--max-memory", type=float, default=None, metavar="GB",
                   help="each worker's memory (address space) limit; one that grows past it ends as one "
                        "error or crash record (default: 60%% of the machine's memory / jobs, at least 2; "
                        "not applied with --jobs 0)")
    p.add_argument("--resume", action="store_true",
                   help="skip executions already in results.jsonl (refused if written with other library versions)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument("--cache", metavar="DIR",
                       help=f"the compiled-artifact cache folder (default {default_dir()}; "
                            f"size bound {MAX_GB_ENV}, default {DEFAULT_MAX_GB:g} GB)")
    cache.add_argument("--no-cache", action="store_true", help="build every artifact, store none")
    p.add_argument("--executor", choices=ray_executor.EXECUTORS, default="local",
                   help="local: forkserver worker processes (default); ray: Ray actors (pip install 'normdiff[ray]')")
    p.add_argument("--address", metavar="RAY_ADDRESS",
                   help="the Ray cluster to join (default: a local one started for the run)")
    p.add_argument("--baseline", metavar="FILE", action="append",
                   help="the gate's baseline (reports/baseline.json): failures it expects get no attribution "
                        "(repeatable: what any of them expects)")
    p.add_argument("--per-suite", action="store_true",
                   help="with --suite repeated: one run of them all (the workers' start paid once), each suite's "
                        "results and reports written into OUT/SUITE/ as a run of it alone would")
    p.add_argument("--attribute", action="store_true",
                   help="attribute every failing execution, known ones too (default: only those the --baseline "
                        "does not expect; every one without --baseline)")
    _history_options(p)
    add_module_options(p, with_class=True)
    p.set_defaults(func=cmd_run)

    p = subparsers.add_parser("cases", help="print a suite's specs as JSON lines")
    p.add_argument("--suite", required=True)
    p.add_argument("--programs", action="store_true",
                   help="print each layer/rms style case as its program twin (same inputs, same bits)")
    p.set_defaults(func=cmd_cases)

    p = subparsers.add_parser("merge", help="combine shard outputs into one results file and reports")
    p.add_argument("dirs", nargs="+", metavar="DIR")
    p.add_argument("--out", default=DEFAULT_OUT)
    _history_options(p)
    p.set_defaults(func=cmd_merge)
