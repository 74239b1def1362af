"""`normdiff repro SPEC.json|CASE_ID|BUG-ID [--path P] [-o FILE|DIR]`: a standalone reproduction script.

A script runs correctly under any name, torch.py or onnxruntime.py included:
it takes its own folder off sys.path before its imports (harness.repro.pieces).
`-o DIR` names it repro-CASE_ID-PATH.py, which no import statement can name.
The file gets 0777 less the umask, as an executable written by hand would.
"""
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
    output = args.output
    if os.path.isdir(output) or output.endswith(os.sep):
        output = os.path.join(output, script_name(spec.case_id, path))
    try:
        write_atomic(output, text, mode=0o777)
    except OSError as exc:
        raise UsageError(f"-o: cannot write {output} ({exc.strerror})") from None
    print(f"normdiff: wrote {output}: {spec} on {path}", file=sys.stderr)
    return 0


def script_name(case_id: str, path: str) -> str:
    """The script's file name in an `-o DIR`: hyphens make it a name no import can shadow or mean."""
    return f"repro-{case_id}-{path}.py"


def add_command(subparsers) -> None:
    p = subparsers.add_parser(
        "repro", help="write a standalone script reproducing a case (plain torch/tvm/executorch/numpy)")
    p.add_argument("target", metavar="SPEC.json|CASE_ID|BUG-ID",
                   help="a spec file, a case_id from the results, or a catalog bug id")
    p.add_argument("--path", help="the path to reproduce on (default: the bug's, or the case's failing path)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the script here; into a folder as repro-CASE_ID-PATH.py (default: stdout)")
    p.add_argument("--results", default=DEFAULT_RESULTS,
                   help=f"results to look a CASE_ID up in (default {DEFAULT_RESULTS})")
    p.set_defaults(func=cmd_repro)
