"""The zoo's builds: does each implementation build, export and lift? Asked of the runner's workers, as any
module case is.

Each implementation's spec (normal input) in each dtype is resolved under the
pseudo path LIFT (harness.engine.preflight's step: import, build, export,
lift) on the run's warm, isolated workers: the parent never imports the
library, a hang is a timeout and a crash a crash of that one task, and the
answer is the LIFT record itself (plain data). `status` says how far it got:
lifted > exported (its graph holds an op the language cannot) > built (its
export failed) > failed (it could not be built: the reason says why).
"""
from __future__ import annotations

import sys
from collections import Counter

from harness.core.verdicts import Verdict
from harness.modules.handlers import HANDLERS, SKIP
from harness.zoo.catalog import BUILD_TIMEOUT, DTYPES, Zoo

STATUSES = ("lifted", "exported", "built", "failed", "no spec")


def status_of(record: dict) -> dict:
    """{status, stage, reason, ops} of a LIFT record."""
    verdict, stage, message = record["verdict"], record.get("stage"), record.get("message") or ""
    ops = list((record.get("lifted") or {}).get("ops", []))
    if verdict == Verdict.PASS:
        return {"status": "lifted", "stage": "", "reason": "", "ops": ops, "pattern": record.get("lifted_pattern")}
    if verdict == Verdict.UNSUPPORTED or (verdict == Verdict.ERROR and stage == "lift"):
        return {"status": "exported", "stage": "lift", "reason": message, "ops": ops}
    if verdict == Verdict.ERROR and stage == "export":
        return {"status": "built", "stage": "export", "reason": message, "ops": ops}
    if verdict == Verdict.ERROR and stage == "spec":
        return {"status": "failed", "stage": "build", "reason": message, "ops": ops}
    return {"status": "failed", "stage": str(verdict), "reason": message, "ops": ops}


def resolve_zoo(zoo: Zoo, dtypes=DTYPES, jobs: int = 2, timeout: float = BUILD_TIMEOUT, names=None,
                on_record=None) -> list[dict]:
    """One row per implementation: its entry and, per dtype, how far its spec got (plain data, JSON)."""
    from harness.engine.plan import Task
    from harness.engine.run import execute_tasks
    from harness.modules import LIFT
    from harness.spec import CaseSpec

    if zoo.sys_path and zoo.sys_path not in sys.path:
        sys.path.append(zoo.sys_path)  # the workers import the classes from there (nothing is imported here)
    entries = [e for e in zoo.entries if names is None or e.name in names]
    tasks, which = [], {}
    for e in entries:
        for d in dtypes if e.base else ():
            spec = CaseSpec.from_dict({**e.base, "dtype": d, "input": {"kind": "normal"}})
            which[spec.case_id] = (e.key, d)
            tasks.append(Task(spec, LIFT))
    results: dict[tuple[str, str], dict] = {}

    def done(record: dict) -> None:
        key = which[record["case_id"]]
        results[key] = {**status_of(record), "class": record["case"]["class"], "dtype": key[1]}
        if on_record:
            on_record(results[key])

    execute_tasks(tasks, done, jobs=jobs, timeout=timeout)
    out = []
    for e in entries:
        row = {"key": e.key, "representative": e.representative, "members": list(e.members),
               "spec": e.base, "reason": e.reason, "results": {}}
        for d in dtypes:
            row["results"][d] = results.get((e.key, d)) or {"status": "no spec", "stage": "synth",
                                                             "reason": e.reason, "ops": []}
        out.append(row)
    return out


def summary(rows: list[dict], dtypes=DTYPES) -> dict:
    """Counts per dtype and status, and every implementation short of lifted with its reason."""
    counts = {d: dict(Counter(r["results"][d]["status"] for r in rows)) for d in dtypes}
    failures = [{"class": r["representative"], "dtype": d, "status": r["results"][d]["status"],
                 "stage": r["results"][d].get("stage", ""), "reason": r["results"][d].get("reason", "")}
                for r in rows for d in dtypes if r["results"][d]["status"] != "lifted"]
    return {"implementations": len(rows), "counts": counts, "failures": failures}


def packet(op: str) -> str:
    """`aten.pow.Tensor_Scalar` -> `pow`; `<built-in function getitem>` -> `getitem`."""
    if op.startswith("<built-in function "):
        return op.removeprefix("<built-in function ").rstrip(">")
    parts = op.split(".")
    return parts[1] if parts[0] == "aten" and len(parts) > 1 else parts[-1] if len(parts) > 1 else op


def outside(ops) -> list[str]:
    """The ops (full names) of `ops` the lifter cannot write in the program language (its handlers,
    harness/modules/handlers.py, read from the op table, are the one definition), export's bookkeeping left out."""
    return sorted(o for o in ops if packet(o) not in HANDLERS and packet(o) not in SKIP)
