"""`normdiff repro SPEC.json|CASE_ID|BUG-ID [--path P] [-o FILE|DIR] [--report]`: a standalone reproduction script.

`--report` writes a bug report into a folder instead (harness.repro.report):
report.md, the short script it pastes, and the full script.

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
from harness.core.verdicts import DEFAULT_TIMEOUT
from harness.repro.resolve import DEFAULT_RESULTS, check_path, resolve
from harness.repro.script import render


def _module_script(spec, path: str, inline: bool, extra: dict) -> str:
    """A module case's script: its class resolved in a worker first (it is user code), then written out."""
    from harness.core.verdicts import Verdict
    from harness.engine.plan import Task
    from harness.engine.run import execute_tasks
    from harness.modules import LIFT
    from harness.repro.module_script import render_module

    records: list[dict] = []
    execute_tasks([Task(spec, LIFT)], records.append, jobs=1, timeout=DEFAULT_TIMEOUT)
    record = records[0]
    if record["verdict"] != Verdict.PASS:
        raise UsageError(record["message"] or f"{spec.cls}: {record['verdict']} while it was resolved")
    return render_module(spec, path, record, inline=inline, **extra)


def cmd_report(args) -> int:
    """--report: report.md, the short script and the full script in -o DIR (default report-CASE_ID-PATH)."""
    from harness.repro import report

    if args.inline:
        raise UsageError("--inline: --report pastes a module case's lifted program already")
    draft = report.plan(args.target, args.path, args.results)
    folder = args.output if args.output not in (None, "-") else f"report-{draft.spec.case_id}-{draft.path}"
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise UsageError(f"-o: {folder} is a file; --report writes a folder")
    try:
        records = report.run_drafts([draft], jobs=os.cpu_count() or 1, timeout=DEFAULT_TIMEOUT)
    except KeyboardInterrupt:
        print("normdiff: interrupted", file=sys.stderr)
        return 130
    report.failing(draft, records)  # a target that passes: one line, exit 2
    try:
        written, code, lines = report.write_draft(draft, records, folder)
    except OSError as exc:
        raise UsageError(f"-o: cannot write {folder} ({exc.strerror})") from None
    print(f"normdiff: wrote {written}: {draft.spec} on {draft.path}; its short script ({lines} lines) exits {code}",
          file=sys.stderr)
    return 0


def cmd_repro(args) -> int:
    if args.report:
        return cmd_report(args)
    _known_stores(args)
    spec, path, extra = resolve(args.target, args.path, args.results)
    check_path(path)
    if spec.is_module:
        text = _module_script(spec, path, args.inline, extra)
    elif args.inline:
        raise UsageError("--inline: only a module case has a lifted program to paste")
    else:
        text = render(spec, path, **extra)
    if args.output in (None, "-"):
        sys.stdout.write(text)
        return 0
    output = args.output
    if os.path.isdir(output) or output.endswith(os.sep):
        output = os.path.join(output, script_name(spec.case_id, path))
    try:
        write_atomic(output, text, mode=0o777)
        beside = _captured_beside(spec, output)
    except OSError as exc:
        raise UsageError(f"-o: cannot write {output} ({exc.strerror})") from None
    print(f"normdiff: wrote {output}{beside}: {spec} on {path}", file=sys.stderr)
    return 0


def _known_stores(args) -> None:
    """A captured input (`normdiff model`) is read from the store beside the results or the spec file."""
    from harness.core import captured

    for base in (args.results, args.target):
        captured.use_store_beside(base)


def _captured_beside(spec, output: str) -> str:
    """Copy a captured input next to the script (captured/HEX.bin), which reads it from there; what to say."""
    import shutil

    from harness.core import captured

    inp = spec.input_dict
    if inp["kind"] != "captured":
        return ""
    folder = os.path.join(os.path.dirname(os.path.abspath(output)), captured.FOLDER)
    source = captured.find(inp["sha256"])
    target = os.path.join(folder, os.path.basename(source))
    if os.path.abspath(source) != os.path.abspath(target):
        os.makedirs(folder, exist_ok=True)
        shutil.copyfile(source, target)
    return f" (its captured input in {target})"


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
    p.add_argument("--inline", action="store_true",
                   help="a module case: paste its lifted program as the model instead of importing the class")
    p.add_argument("--report", action="store_true",
                   help="write report.md (an issue body: expected, actual, controls run, environment), a short "
                        "script and the full one into -o DIR (default report-CASE_ID-PATH)")
    p.set_defaults(func=cmd_repro)
