"""`normdiff lift CLASS [--init JSON] [--dtype D] [--shape …]`: a module's lifted program as a ready §7 spec.

The class is imported, built, exported and lifted in a worker process (it is
user code); what is printed is a program case (docs/contracts.md §7) with the module's
names, shapes and parameter values, which `normdiff run --case` takes and
which gives the module case's verdicts. A class that cannot be built, or
whose graph holds an op the language cannot, is one line and exit 2.
"""
from __future__ import annotations

import json
import sys

from harness.commands.module_args import add_module_options, module_spec
from harness.core.errors import UsageError
from harness.core.verdicts import DEFAULT_TIMEOUT, Verdict
from harness.modules.lifted_spec import program_spec


def cmd_lift(args) -> int:
    from harness.engine.plan import Task
    from harness.engine.run import execute_tasks
    from harness.modules import LIFT

    spec = module_spec(args.cls, args)
    records = []
    execute_tasks([Task(spec, LIFT)], records.append, jobs=args.jobs, timeout=args.timeout)
    record = records[0]
    if record["verdict"] != Verdict.PASS:
        stage = f" at {record['stage']}" if record.get("stage") else ""
        raise UsageError(f"{record['message']}" if record["verdict"] in (Verdict.ERROR, Verdict.UNSUPPORTED)
                         and record.get("stage") in ("spec", None) else f"{record['verdict']}{stage}: "
                         f"{record['message']}")
    out, notes = program_spec(spec, record)
    sys.stdout.write("{" + ",\n ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in out.items()) + "}\n")
    for note in notes:
        print(f"normdiff: note: {note}", file=sys.stderr)
    return 0


def add_command(subparsers) -> None:
    p = subparsers.add_parser("lift", help="print a norm class's lifted program as a ready program spec "
                                           "(docs/contracts.md §7)")
    p.add_argument("cls", metavar="PKG.MOD:CLASS", help="the class, importable from PYTHONPATH")
    add_module_options(p, with_class=False)
    p.add_argument("--jobs", type=int, default=1, help="1: lift in a worker process (default); 0: in this one")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    p.set_defaults(func=cmd_lift)
