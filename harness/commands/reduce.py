"""`normdiff reduce SPEC.json|CASE_ID|BUG-ID --path P [-o FILE]`: the smallest program failing on P the same way.

The target is resolved as `repro` resolves it (harness/repro/resolve.py);
the reducer (harness/search/reduce.py) judges its candidates on warm
workers, one per path (the path and eager), as the fuzzer does. Each accepted
step is a line on stderr; the reduced program spec is JSON on stdout or in
FILE. A target that does not fail on P (or fails on eager too, or has no
program form that fails the same way) and a path that is unknown or not
installed are one line and exit 2.
"""
from __future__ import annotations

import json
import sys
import time

from harness import paths
from harness.core.errors import UsageError
from harness.core.records import write_atomic
from harness.core.verdicts import DEFAULT_TIMEOUT
from harness.repro.resolve import DEFAULT_RESULTS, check_path, resolve
from harness.search.reduce import (
    CHUNK, CONTROL, KEEP_STRUCTURES, MAX_CANDIDATES, MAX_ROUNDS, NotReducible, describe, reduce_failure, spec_text,
)


def say(line: str) -> None:
    print(f"normdiff reduce: {line}", file=sys.stderr, flush=True)


def check_installed(path: str) -> None:
    """UsageError unless every package the path runs is installed."""
    if path == CONTROL:
        raise UsageError(f"--path: {CONTROL} is the control a reduction keeps passing; name a compiled path")
    try:
        packages = paths.get(path).packages
    except Exception as exc:  # noqa: BLE001 - a plug-in path that cannot be loaded is bad usage here
        raise UsageError(f"--path: {path} cannot be loaded ({str(exc).splitlines()[0] if str(exc) else exc!r})") \
            from None
    missing = [d for d in packages if paths.installed_version(d) is None]
    if missing:
        raise UsageError(f"--path: {path} needs {', '.join(missing)}, which is not installed")


def run_reduction(spec, path: str, *, timeout: float = DEFAULT_TIMEOUT, max_rounds: int = MAX_ROUNDS,
                  max_candidates: int = MAX_CANDIDATES, chunk: int = CHUNK, progress=say):
    """Reduce `spec` on `path` on warm workers: the Outcome; NotReducible when it cannot be."""
    from harness.engine.pool import Pool

    refused = None
    with Pool([path, CONTROL], timeout=timeout, keep=KEEP_STRUCTURES) as pool:
        try:  # refused inside, raised once the workers are stopped gracefully
            return reduce_failure(spec, path, pool.map, max_rounds=max_rounds, max_candidates=max_candidates,
                                  chunk=chunk, say=progress)
        except NotReducible as exc:
            refused = exc
    raise refused


def cmd_reduce(args) -> int:
    from harness.engine.procs import RunnerError

    spec, path, _ = resolve(args.target, args.path, args.results)
    check_path(path)
    check_installed(path)
    for name in ("max_rounds", "max_candidates"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')}: must be at least 1")
    clock = time.monotonic()
    try:
        outcome = run_reduction(spec, path, timeout=args.timeout, max_rounds=args.max_rounds,
                                max_candidates=args.max_candidates, progress=say if not args.quiet else lambda _: None)
    except NotReducible as exc:
        raise UsageError(str(exc)) from None
    except RunnerError as exc:
        raise UsageError(f"reduce: {exc}") from None
    except KeyboardInterrupt:
        say("interrupted; nothing written")
        return 130
    before, after = outcome.ops
    seconds = time.monotonic() - clock
    if not outcome.steps:
        say(f"nothing smaller fails the same way on {path}; the target's program form is written back unchanged "
            f"({before} ops, {seconds:.1f} s)")
    else:
        budget = "; the budget of rounds ended first" if outcome.exhausted else ""
        say(f"reduced {before} -> {after} ops in {len(outcome.steps)} steps ({outcome.judged} candidates judged, "
            f"{seconds:.1f} s){budget}: {describe(outcome.record)} on {path}, eager passes")
    text = spec_text(outcome.spec)
    if args.output in (None, "-"):
        sys.stdout.write(text)
        return 0
    try:
        write_atomic(args.output, text)
    except OSError as exc:
        raise UsageError(f"-o: cannot write {args.output} ({exc.strerror})") from None
    say(f"wrote {args.output}")
    return 0


def add_command(subparsers) -> None:
    p = subparsers.add_parser("reduce", help="the smallest program that still fails on a path the same way, "
                                             "eager passing (docs/reduce.md)")
    p.add_argument("target", metavar="SPEC.json|CASE_ID|BUG-ID",
                   help="a spec file, a case_id from the results, or a catalog bug id")
    p.add_argument("--path", help="the failing path (default: the bug's, or the case's failing path)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the reduced spec here (default: stdout)")
    p.add_argument("--results", default=DEFAULT_RESULTS,
                   help=f"results to look a CASE_ID up in (default {DEFAULT_RESULTS})")
    p.add_argument("--max-rounds", type=int, default=MAX_ROUNDS, help=f"steps accepted at most (default {MAX_ROUNDS})")
    p.add_argument("--max-candidates", type=int, default=MAX_CANDIDATES,
                   help=f"candidates judged per round at most, the smallest first (default {MAX_CANDIDATES})")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per execution")
    p.add_argument("--quiet", action="store_true", help="no step lines")
    p.set_defaults(func=cmd_reduce)
