"""A bug report a maintainer acts on (`normdiff repro --report`, `normdiff bugs --drafts`): report.md and scripts.

apache/tvm#20909 is the model: a title naming the rewrite and the dtype;
expected values (the FP64 reference, eager) and actual ones (the first
values, the error in absolute terms, in ULPs and against the bound, the
output dtype); controls that pass; the environment; a short script, pasted,
that exits 1 while the bug is present, and its output. The failing execution
and every control run through the engine in warm workers (the records are
the facts the report states); the short script (harness.repro.short_script)
runs once in a subprocess, its output pasted as the seed pastes its own.

The report is a function of the target and what the machine gives, so the
same target gives the same bytes, apart from the one line naming the date and
the commit (`STAMP`). A module case is reported through its lifted program
(`normdiff lift`'s spec, resolved in a worker): the form needing nothing of
the user's code, and the verdict is the module's.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from cases.bug import Bug
from harness import paths
from harness.core.dtypes import np_dtype
from harness.core.errors import UsageError
from harness.core.records import write_atomic
from harness.core.verdicts import DEFAULT_TIMEOUT, Verdict
from harness.engine.plan import Task
from harness.engine.run import execute_tasks
from harness.oracle.inputs import make_inputs
from harness.oracle.reference import reference
from harness.repro.controls import Control, controls
from harness.repro.resolve import NO_MODULE_GRADIENT, resolve
from harness.repro.script import render
from harness.repro.short_script import FIRST, first_values, render_short
from harness.spec import CaseSpec

REPORT = "report.md"
SHORT = "repro.py"  # the short script's name in the report's folder (what its steps say to run)
STAMP = "Written by normdiff"  # the one line of the report that names the date and the commit
SCRIPT_TIMEOUT = 600.0  # seconds for the short script (a TVM compile of a decomposed norm takes a few)


@dataclass(frozen=True)
class Draft:
    """What one report is about: the case, its path, the catalog entry (or None), the target, its controls."""

    target: str
    spec: CaseSpec
    path: str
    bug: Bug | None
    controls: tuple[Control, ...]
    lifted_from: str | None = None  # a module case's class: the spec is its lifted program

    @property
    def tasks(self) -> list[Task]:
        return [Task(self.spec, self.path), *(Task(c.spec, c.path) for c in self.controls if c.runs)]


def check_installed(path: str) -> None:
    """UsageError (one line) unless every distribution `path` runs on is installed."""
    for dist in paths.get(path).packages:
        if paths.installed_version(dist) is None:
            raise UsageError(f"path {path} is not installed here (needs the {dist} package)")


def lifted(spec: CaseSpec, timeout: float = DEFAULT_TIMEOUT) -> CaseSpec:
    """A module case's lifted program as a program case: the class resolved in a worker (user code runs there)."""
    from harness.modules import LIFT
    from harness.modules.lifted_spec import program_spec

    records: list[dict] = []
    execute_tasks([Task(spec, LIFT)], records.append, jobs=1, timeout=timeout)
    record = records[0]
    if record["verdict"] != Verdict.PASS:
        raise UsageError(record["message"] or f"{spec.cls}: {record['verdict']} while it was resolved")
    return CaseSpec.from_dict(program_spec(spec, record)[0])


def plan(target: str, path: str | None, results: str, timeout: float = DEFAULT_TIMEOUT) -> Draft:
    """The Draft of TARGET (a catalog id, a spec file, a case_id) on PATH (default: the bug's or failing one)."""
    spec, path, extra = resolve(target, path, results)
    check_installed(path)
    bug = extra.get("bug")
    origin = None
    if spec.is_module and spec.grad:
        raise UsageError(f"{spec}: {NO_MODULE_GRADIENT}")
    if spec.is_module:
        origin, spec = spec.cls, lifted(spec, timeout)
    catalog = tuple((s, p) for s, p in (bug.controls if bug else ()) if not s.is_module)
    return Draft(target, spec, path, bug, tuple(controls(spec, path, catalog)), origin)


def run_drafts(drafts: list[Draft], jobs: int, timeout: float) -> dict:
    """(case_id, path) -> record for every execution the drafts need, run in warm workers."""
    tasks: dict[tuple[str, str], Task] = {}
    for d in drafts:
        for t in d.tasks:
            tasks.setdefault((t.spec.case_id, t.path), t)
    records: dict[tuple[str, str], dict] = {}
    execute_tasks(list(tasks.values()), lambda r: records.__setitem__((r["case_id"], r["path"]), r),
                  jobs=min(jobs, len(tasks)) if jobs else jobs, timeout=timeout)
    return records


def failing(draft: Draft, records: dict) -> dict:
    """The draft's own record; UsageError (one line) when it passes: there is nothing to report."""
    record = records.get((draft.spec.case_id, draft.path))
    if record is None:
        raise UsageError(f"{draft.target}: no record of {draft.spec} on {draft.path}")
    if record["verdict"] == Verdict.PASS:
        raise UsageError(f"{draft.target}: passes on {draft.path} ({record['message']}); nothing to report")
    return record


def _stamp() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True,
                                text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    return f"{STAMP} (commit {commit}) on {datetime.date.today().isoformat()}."


def run_script(folder: str, timeout: float = SCRIPT_TIMEOUT) -> tuple[int, str]:
    """(exit code, stdout plus the last line of stderr where it failed) of the short script in `folder`."""
    try:
        done = subprocess.run([sys.executable, SHORT], cwd=folder, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, f"(no output: the script ran over {timeout:g} s)"
    lines = done.stdout.rstrip("\n").splitlines()
    if "Traceback" in done.stderr:  # the path raised: the exception's own line ends the output
        lines += [line for line in done.stderr.splitlines() if line.strip() and not line.startswith(" ")][-1:]
    return done.returncode, "\n".join(lines)


def rewrite_of(path: str) -> str | None:
    """The step a path adds to its control path (from their descriptions), or None for a path without one."""
    runner = paths.get(path)
    if not runner.control_path:
        return None
    base = paths.get(runner.control_path).description.split(" -> ")
    steps = runner.description.split(" -> ")
    added = [step for step in steps[:-1] if step not in base]  # the last step is how the result runs
    return " -> ".join(added) or (steps[-1] if steps[-1] not in base else runner.description)


def _norm(spec: CaseSpec) -> str:
    return f"{spec.dtype} {spec.pattern if spec.pattern != 'program' else 'program'}"


def outcome(record: dict) -> str:
    """What went wrong, in a few words, from a record."""
    v = record["verdict"]
    if v == Verdict.INACCURATE:
        return (f"max abs error {record['max_abs_err']:.4g} ({record['max_ulp']:.4g} ULP of {record['rounding_dtype']},"
                f" {record['max_err_over_tol']:.3g}x the bound)")
    if v == Verdict.DTYPE_MISMATCH:
        return f"returns {record['out_dtype']} where eager returns {record['expected_dtype']}"
    if v in (Verdict.ERROR, Verdict.UNSUPPORTED):
        return f"fails at {record.get('stage') or 'run'}: {record['message']}"
    return f"{v}: {record['message']}"


def title(draft: Draft, record: dict) -> str:
    rewrite = rewrite_of(draft.path)
    return (f"[{draft.path}] " + (f"{rewrite}: " if rewrite else "")
            + f"{_norm(draft.spec)} {record['verdict']}, {outcome(record)}")


def _first(values: np.ndarray) -> str:
    return "[" + ", ".join(repr(float(v)) for v in np.asarray(values).reshape(-1)[:FIRST]) + "]"


def _control_row(c: Control, records: dict) -> str:
    if not c.runs:
        return f"| {c.name} | (none) | | not run: {c.why} |"
    r = records.get((c.spec.case_id, c.path)) or {"verdict": "missing", "message": "no record"}
    result = "passes" if r["verdict"] == Verdict.PASS else f"**does not pass: {r['verdict']}**"
    return f"| {c.name} | {c.what}: `{c.spec}` | `{c.path}` | {result} ({r['message']}) |"


def _environment(record: dict) -> list[str]:
    wanted = {"numpy", "torch", *paths.get(record["path"]).packages}  # the path's libraries, not every path's
    versions = ", ".join(f"{k} {v}" for k, v in sorted(record.get("versions", {}).items()) if k in wanted)
    cpu = record.get("cpu")
    features = ", ".join(cpu) if cpu else ("none of normdiff's" if cpu is not None else "unknown (no /proc/cpuinfo)")
    return [f"- Libraries: {versions}", f"- Python {platform.python_version()}; {platform.platform()}",
            f"- CPU: {platform.machine()}, features {features}", f"- Path `{record['path']}`: "
            f"{paths.get(record['path']).description}"]


def render_report(draft: Draft, records: dict, code: int, output: str, short: str, full_name: str) -> str:
    """report.md of `draft`: its own record, its controls' records, and the short script's exit code and output."""
    record = failing(draft, records)
    spec, path = draft.spec, draft.path
    ref = reference(spec, make_inputs(spec))
    out_dtype = ref.out_dtype
    eager = first_values(output, "eager")
    actual = first_values(output, path)
    lines = [f"# {title(draft, record)}", "", _stamp(), ""]
    if draft.bug is not None:
        b = draft.bug
        lines += [f"normdiff catalog entry `{b.id}`: {b.title}. {b.link or 'Not reported upstream yet.'}", "",
                  b.note, ""]
    if draft.lifted_from:
        lines += [f"The case is `{draft.lifted_from}` as a module case; reported through its lifted program "
                  "(`normdiff lift`), which needs nothing of the class's code and gets the same verdict.", ""]
    lines += ["## Expected behavior", "",
              f"`{path}` ({paths.get(path).description}) should compute the case as eager PyTorch does, within "
              f"normdiff's bound. Case: `{spec}` (spec below). The FP64 NumPy reference is {_first(ref.out)}, "
              f"rounded to {out_dtype} {_first(ref.out.astype(np_dtype(out_dtype)))}."]
    if eager:
        lines[-1] += (f" Eager PyTorch gives {eager[1]} ({eager[0]}), max abs error "
                      f"{record.get('eager_max_abs_err', float('nan')):.4g}.")
    lines += ["", "## Actual behavior", ""]
    if record["verdict"] in (Verdict.ERROR, Verdict.UNSUPPORTED, Verdict.CRASH, Verdict.TIMEOUT):
        lines.append(f"`{path}` {outcome(record)}.")
    else:
        shown = f"returns {actual[1]} ({actual[0]})" if actual else "returns"
        lines.append(f"`{path}` {shown}: {outcome(record)}. Output dtype {record['out_dtype']}, expected "
                     f"{record['expected_dtype']}. normdiff: {record['verdict']} ({record['message']}).")
    if record.get("first_stage_over"):
        over = next((s for s in record.get("attribution", []) if s["stage"] == record["first_stage_over"]), {})
        lines += ["", f"The first stage over its bound is `{record['first_stage_over']}`"
                  + (f" (`{over.get('node')}`, stored in {over.get('dtype')} where the program computes it in "
                     f"{over.get('program_dtype')}, {over.get('max_err_over_tol', 0):.3g}x its bound)" if over else "")
                  + "; the full script prints the whole stage table."]
    lines += ["", "## Controls", "", "| control | case | path | result |", "|---|---|---|---|"]
    lines += [_control_row(c, records) for c in draft.controls]
    lines += ["", "## Environment", "", *_environment(record), "", "## Steps to reproduce", "",
              f"Save as `{SHORT}` and run `python {SHORT}` (needs torch, numpy, ml_dtypes and "
              f"{', '.join(d for d in paths.get(path).packages if d != 'torch') or 'nothing else'}). "
              "It exits 1 while the bug is present and 0 once it is fixed.", "", "```python", short.rstrip("\n"),
              "```", "", f"Its output (exit status {code}):", "", "```", output, "```", ""]
    if code != 1:  # said, never hidden: the script does not show what the engine flags (a flaky path, a timeout)
        lines += [f"**The script exits {code} here, not 1**, while normdiff's own run of the case gives "
                  f"{record['verdict']} ({record['message']}).", ""]
    lines += [f"`{full_name}` beside it is normdiff's full script (every input checked byte for byte, the "
              "environment, and the stage table where the path exposes its intermediates).", "",
              "normdiff spec of the case:", "", "```json", json.dumps(spec.to_dict(), sort_keys=True), "```"]
    return "\n".join(lines) + "\n"


def write_draft(draft: Draft, records: dict, folder: str) -> tuple[str, int, int]:
    """Write report.md, the short script and the full script into `folder`: (report path, exit code, lines)."""
    record = failing(draft, records)
    os.makedirs(folder, exist_ok=True)
    short = render_short(draft.spec, draft.path, title(draft, record))
    full_name = f"repro-{draft.spec.case_id}-{draft.path}.py"
    write_atomic(os.path.join(folder, SHORT), short, mode=0o777)
    write_atomic(os.path.join(folder, full_name), render(draft.spec, draft.path, bug=draft.bug), mode=0o777)
    code, output = run_script(folder)
    report = os.path.join(folder, REPORT)
    write_atomic(report, render_report(draft, records, code, output, short, full_name))
    return report, code, len(short.splitlines())
