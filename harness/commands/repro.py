"""`normdiff repro SPEC.json|CASE_ID|BUG-ID [--path P] [-o FILE]`: a standalone reproduction script."""
from __future__ import annotations

import os
import sys

from harness.core.errors import UsageError
from harness.core.records import write_atomic
from harness.repro.resolve import DEFAULT_RESULTS, check_path, resolve
from harness.repro.script import render


def cmd_repro(args) -> int:
    spec, path, extra = resolve(args.target, args.path, args.results)
    check_path(path)
    text = render(spec, path, **extra)
    if args.output in (None, "-"):
        sys.stdout.write(text)
        return 0
    try:
        write_atomic(args.output, text)
        os.chmod(args.output, 0o755)
    except OSError as exc:
        raise UsageError(f"-o: cannot write {args.output} ({exc.strerror})") from None
    print(f"normdiff: wrote {args.output}: {spec} on {path}", file=sys.stderr)
    return 0


def add_command(subparsers) -> None:
    p = subparsers.add_parser(
        "repro", help="write a standalone script reproducing a case (plain torch/tvm/executorch/numpy)")
    p.add_argument("target", metavar="SPEC.json|CASE_ID|BUG-ID",
                   help="a spec file, a case_id from the results, or a catalog bug id")
    p.add_argument("--path", help="the path to reproduce on (default: the bug's, or the case's failing path)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the script here (default: stdout)")
    p.add_argument("--results", default=DEFAULT_RESULTS,
                   help=f"results to look a CASE_ID up in (default {DEFAULT_RESULTS})")
    p.set_defaults(func=cmd_repro)
