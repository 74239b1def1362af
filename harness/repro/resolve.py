"""What `normdiff repro SPEC.json|CASE_ID|BUG-ID [--path P]` reproduces: a spec and a path.

Turns a finding into something an upstream maintainer can run: one Python
file that needs only torch, numpy, ml_dtypes and the library under test, and
exits 1 while the problem is present (harness.repro.script writes it). The
target is a catalog id (`normdiff bugs` lists them), a spec file, or the
case_id of a record in the latest results, so a nightly failure becomes a
script in one command.
"""
from __future__ import annotations

import os
import re
import sys

from cases import bugs
from harness import paths
from harness.core.errors import UsageError
from harness.core.records import latest_per_execution, read_results
from harness.spec import CaseSpec, SpecError, load_spec_file
from harness.core.verdicts import DEFAULT_OUT, Verdict

DEFAULT_RESULTS = os.path.join(DEFAULT_OUT, "results.jsonl")
# a module case's scripts are its lifted forward program's: its gradients have none yet
NO_MODULE_GRADIENT = "a module case's gradient script is not written yet (docs/gradients.md#repro-scripts)"
_CASE_ID = re.compile(r"^[0-9a-f]{12}$")


def _usage(message: str) -> UsageError:
    return UsageError(message)


def check_path(path: str | None) -> None:
    """UsageError unless `path` is None or a registered path (every path writes its own script part)."""
    if path is not None and path not in paths.names():
        raise _usage(f"--path: unknown path {path!r}; known: {', '.join(paths.names())}")


def _from_bug(bug, path: str | None):
    """The bug's first spec on `path` (default: the bug's first path)."""
    return bug.specs[0], path or bug.paths[0], dict(bug=bug)


def _from_file(target: str, path: str | None):
    if path is None:
        raise _usage(f"{target}: a spec file needs --path (which path to reproduce it on)")
    try:
        specs = load_spec_file(target)
    except SpecError as exc:
        raise _usage(str(exc)) from None
    if len(specs) != 1:
        raise _usage(f"{target}: holds {len(specs)} specs; repro takes one")
    return specs[0], path, {}


def _from_results(case_id: str, path: str | None, results: str):
    """The case's spec from the results file; the path is the failing one unless given."""
    if not os.path.exists(results):
        raise _usage(f"{case_id}: no results file {results} to look the case up in "
                     "(run `normdiff run` first, or pass --results FILE)")
    records = [r for r in latest_per_execution(read_results(results)) if r["case_id"] == case_id]
    if not records:
        raise _usage(f"{case_id}: not in {results}")
    order = {name: i for i, name in enumerate(paths.names())}
    records.sort(key=lambda r: (order.get(r["path"], len(order)), r["path"]))
    if path is None:
        failing = [r for r in records if r["verdict"] != Verdict.PASS]
        if not failing:
            raise _usage(f"{case_id}: passes on every path in {results}; name one with --path")
        chosen = failing[0]
        if len(failing) > 1:
            others = ", ".join(r["path"] for r in failing[1:])
            print(f"normdiff: {case_id} also fails on {others}; reproducing {chosen['path']} "
                  "(choose with --path)", file=sys.stderr)
    else:
        matching = [r for r in records if r["path"] == path]
        chosen = matching[0] if matching else records[0]
    try:
        spec = CaseSpec.from_dict(chosen["case"])
    except (SpecError, KeyError, TypeError) as exc:
        raise _usage(f"{case_id}: the record in {results} has no valid spec ({exc})") from None
    chosen_path = path or chosen["path"]
    recorded = None
    if chosen["path"] == chosen_path:
        recorded = f"{chosen['verdict']} ({chosen.get('message') or 'no message'})"
    return spec, chosen_path, dict(recorded=recorded)


def resolve(target: str, path: str | None, results: str):
    """(spec, path, render keywords) for a BUG-ID, a spec file or a CASE_ID."""
    check_path(path)
    if target in bugs.ids():
        return _from_bug(bugs.get(target), path)
    if os.path.isfile(target):
        return _from_file(target, path)
    if _CASE_ID.match(target):
        return _from_results(target, path, results)
    raise _usage(f"{target!r} is not a bug id (`normdiff bugs` lists them), a spec file "
                 "or a 12-hex-digit case id")
