"""`normdiff fuzz`: the command around harness.search (budget, pool, database, reports)."""
from __future__ import annotations

import json
import math
import os
import random
import sys
import time

from harness import paths
from harness.commands.common import paths_arg
from harness.core.errors import UsageError
from harness.core.records import json_safe, write_atomic
from harness.core.verdicts import DEFAULT_OUT, DEFAULT_TIMEOUT
from harness.engine.pool import Pool
from harness.engine.procs import RunnerError
from harness.search.fuzzer import (
    DEFAULT_DATABASE,
    DEFAULT_EXAMPLES,
    DEFAULT_SHRINKS,
    Budget,
    Finding,
    Fuzzer,
)
from harness.search.store import SIGNATURE_FIELDS, clear_failures, signature_name
from harness.commands.fuzz_campaign import run_campaign
from harness.search.programs import BASES, program_batches
from harness.search.strategies import Batch, case_specs, row_length


# Compiled structures a worker keeps (the pool's default, 32, drops them all past that): shrinking comes back
# to the small canonical structures again and again, and a recompose path's artifact is small.
KEEP_STRUCTURES = 256


def _csv(text: str | None) -> list[str] | None:
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    return items or None


def add_command(subparsers) -> None:
    p = subparsers.add_parser("fuzz", help="hypothesis search for failing specs, each shrunk to a minimal one")
    p.add_argument("--paths", help="comma-separated paths to fuzz (default: every built-in path); "
                                   "eager always runs as the baseline")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--max-examples", type=int, help=f"search examples in all (default {DEFAULT_EXAMPLES})")
    budget.add_argument("--minutes", type=float, help="search for this long instead")
    p.add_argument("--out", default=DEFAULT_OUT,
                   help=f"output folder: DIR/failures/<signature>.json and DIR/fuzz.json (default {DEFAULT_OUT})")
    p.add_argument("--seed", type=int, help="makes the search reproducible (default: random, printed)")
    p.add_argument("--database", default=DEFAULT_DATABASE,
                   help=f"hypothesis example database folder, or 'none' (default {DEFAULT_DATABASE})")
    p.add_argument("--patterns", help="restrict to these patterns (comma-separated)")
    p.add_argument("--styles", help="restrict to these styles")
    p.add_argument("--dtypes", help="restrict to these activation dtypes")
    p.add_argument("--inputs", help="input kinds and/or groups: benign, adversarial, all (default all)")
    p.add_argument("--max-row", type=int, default=8192, help="longest layer/rms row (default 8192)")
    p.add_argument("--max-elements", type=int, default=65536, help="largest input (default 65536)")
    p.add_argument("--max-shrinks", type=int, default=DEFAULT_SHRINKS,
                   help=f"shrink steps per signature, each one example or, with --programs, one batch of a "
                        f"structure's inputs (default {DEFAULT_SHRINKS})")
    p.add_argument("--max-failures", type=int, help="stop after this many signatures")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"seconds per execution (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("--quiet", action="store_true", help="no progress lines (the final table still prints)")
    p.add_argument("--programs", action="store_true",
                   help="draw norm programs (docs/contracts.md §7): canonical norms with mutations; --styles "
                        f"names bases ({', '.join(BASES)})")
    p.add_argument("--searches", type=int, default=None,
                   help="searches run at once, each with its own seed, one store (default: cores with --programs, else 1)")
    p.set_defaults(func=cmd_fuzz)


def _options(args) -> tuple[object, dict]:
    """The strategy the arguments ask for, and those arguments as a dict."""
    options = {"patterns": _csv(args.patterns), "styles": _csv(args.styles), "dtypes": _csv(args.dtypes),
               "inputs": _csv(args.inputs), "max_row": args.max_row, "max_elements": args.max_elements}
    # gradient cases (one in GRAD_SHARE, harness.search.strategies.is_grad) only where a path under test trains:
    # elsewhere each would be `unsupported`, an example spent
    grad = None if any(paths.get(name).trains for name in paths_arg(args.paths)) else False
    try:
        if args.programs:
            strategy = program_batches(bases=options["styles"], dtypes=options["dtypes"], input_kinds=options["inputs"],
                                       max_row=min(args.max_row, 4096), max_elements=args.max_elements, grad=grad)
            options["styles"] = None  # bases, not catalog styles: a drawn case's style is "program"
        else:
            strategy = case_specs(patterns=options["patterns"], styles=options["styles"], dtypes=options["dtypes"],
                                  input_kinds=options["inputs"], max_row=args.max_row,
                                  max_elements=args.max_elements, grad=grad).map(Batch.of)
    except ValueError as exc:
        raise UsageError(f"fuzz: {exc}") from None
    return strategy, options


def _check_numbers(args) -> None:
    for name in ("max_examples", "max_shrinks", "max_failures", "searches"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')}: must be >= 1, got {value}")
    if args.minutes is not None and not (args.minutes > 0 and math.isfinite(args.minutes)):
        raise UsageError(f"--minutes: must be > 0, got {args.minutes}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout: must be > 0, got {args.timeout}")
    if args.seed is not None and args.seed < 0:
        raise UsageError(f"--seed: must be >= 0, got {args.seed}")


def cmd_fuzz(args) -> int:
    _check_numbers(args)
    under_test = paths_arg(args.paths)
    strategy, options = _options(args)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2 ** 32)
    searches = args.searches if args.searches is not None else ((os.cpu_count() or 1) if args.programs else 1)
    if searches > 1:
        args.searches = searches
        return run_campaign(args, seed, None if args.minutes else (args.max_examples or DEFAULT_EXAMPLES))
    database = None
    if args.database.lower() != "none":
        from hypothesis.database import DirectoryBasedExampleDatabase

        database = DirectoryBasedExampleDatabase(args.database)
    budget = Budget(max_examples=None if args.minutes else (args.max_examples or DEFAULT_EXAMPLES),
                    minutes=args.minutes, max_shrinks=args.max_shrinks, max_failures=args.max_failures)
    settings_used = {"paths": under_test, "seed": seed, "max_examples": budget.max_examples,
                     "minutes": args.minutes, "max_shrinks": args.max_shrinks,
                     "max_failures": args.max_failures, "database": None if database is None else args.database,
                     **options}

    clear_failures(args.out)
    limit = f"{budget.max_examples} examples" if budget.max_examples else f"{args.minutes:g} minutes"
    print(f"normdiff fuzz: paths {', '.join(under_test)}; seed {seed}; budget {limit}; "
          f"database {settings_used['database']}", file=sys.stderr, flush=True)
    fz = None
    interrupted = False
    try:
        with Pool(["eager", *under_test], timeout=args.timeout, keep=KEEP_STRUCTURES) as pool:
            fz = Fuzzer(pool, under_test, strategy, options, budget, seed, database, args.out,
                        progress=not args.quiet)
            fz.run()
    except KeyboardInterrupt:
        interrupted = True
    except RunnerError as exc:
        print(f"normdiff: error: fuzz: {exc}", file=sys.stderr)
        return 2
    if fz is None:
        return 130
    write_summary(args.out, fz, settings_used)
    _report(fz, args.out, seed)
    if interrupted:
        print("normdiff fuzz: interrupted; what was found is saved", file=sys.stderr)
        return 130
    return 1 if fz.findings else 0


def write_summary(out_dir: str, fz: Fuzzer, args_used: dict) -> str:
    """DIR/fuzz.json: the search's settings, its throughput and every finding with its repro command."""
    elapsed = time.monotonic() - fz.budget.start
    data = {
        "settings": args_used,
        "search_examples": fz.search_examples,
        "shrink_examples": fz.shrink_examples,
        "replay_examples": fz.replay_examples,
        "executions": fz.executions,
        "structures": len(fz.structures),
        "seconds": round(elapsed, 3),
        "examples_per_minute": round(fz.rate(), 2),
        "findings": [{
            **dict(zip(SIGNATURE_FIELDS, f.sig)),
            "signature": signature_name(f.sig), "file": f.file or None,
            "repro": f.repro if f.file else None, "case_id": f.spec.case_id, "case": f.spec.to_dict(),
            "confirmed": f.confirmed, "shrink_complete": f.shrink_complete, "replayed": f.replayed,
            "found_after_examples": f.found_after, "shrink_examples": f.shrink_examples,
            "eager_verdict": f.eager_verdict, "message": f.record.get("message"),
            "record": f.record,
        } for f in sorted(fz.findings, key=lambda f: f.sig)],
    }
    return write_atomic(os.path.join(out_dir, "fuzz.json"), json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n")


def table(findings: list[Finding]) -> str:
    """The signatures found, one line each, with their shrunk spec and file."""
    head = ("path", "verdict", "pattern", "style", "dtype", "shape", "row", "input", "spec file")
    rows = []
    for f in sorted(findings, key=lambda f: f.sig):
        inp = f.spec.input_dict
        kind = inp.pop("kind")
        rows.append((*f.sig, "x".join(map(str, f.spec.shape)), str(row_length(f.spec)),
                     f"{kind}({','.join(f'{k}={v:g}' for k, v in inp.items())})",
                     f.file or "(not confirmed: flaky)"))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *rows]]
    return "\n".join(lines)


def _report(fz: Fuzzer, out_dir: str, seed: int) -> None:
    minutes = (time.monotonic() - fz.budget.start) / 60.0
    err = sys.stderr
    print(f"normdiff fuzz: {fz.examples()} examples ({fz.search_examples} search, {fz.shrink_examples} shrink, "
          f"{fz.replay_examples} replayed; "
          f"{fz.executions} executions) in {minutes:.2f} min: {fz.rate():.1f} examples/min", file=err)
    if not fz.findings:
        print(f"normdiff fuzz: no failure found (seed {seed})", file=err)
        return
    print(f"normdiff fuzz: {len(fz.findings)} signatures (seed {seed}); summary in "
          f"{os.path.join(out_dir, 'fuzz.json')}", file=err)
    print(table(fz.findings), file=err)
    for f in sorted(fz.findings, key=lambda f: f.sig):
        if f.file:
            print(f"  {f.repro}", file=err)
    err.flush()
