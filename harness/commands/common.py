"""What every command shares: the one-line argument parser, --paths and --shard parsing, spec loading."""
from __future__ import annotations

import argparse
import os

from cases.suites import suite
from harness import paths
from harness.core import captured
from harness.core.errors import UsageError
from harness.core.records import latest_per_execution, read_results
from harness.spec import CaseSpec, SpecError, load_spec_file


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


def paths_arg(text: str | None) -> list[str]:
    """The path names of a --paths value (default: every built-in path); UsageError when unknown."""
    if text is None:
        return paths.default_names()
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise UsageError("--paths: no path named")
    known = paths.names()
    for n in names:
        if n not in known:
            raise UsageError(f"--paths: unknown path {n!r}; known: {', '.join(known)}")
    return list(dict.fromkeys(names))


def shard_arg(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        k, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard: expected K/N like 2/4, got {text!r}") from None
    if not (n >= 1 and 1 <= k <= n):
        raise UsageError(f"--shard: need 1 <= K <= N, got {text!r}")
    return k, n


def load_specs(suites: list[str] | None, case_files: list[str] | None, default: str | None = "smoke") -> list[CaseSpec]:
    """The specs of named suites and spec files, each case once; UsageError naming the bad one."""
    specs = []
    wanted = suites or ([] if case_files or default is None else [default])
    for name in wanted:
        try:
            specs += suite(name)
        except KeyError as exc:
            raise UsageError(f"--suite: {exc.args[0]}") from None
    for path in case_files or []:
        captured.use_store_beside(path)  # `normdiff model`'s OUT/instances.jsonl reads its inputs from OUT/captured
        try:
            specs += load_spec_file(path)
        except SpecError as exc:
            raise UsageError(str(exc)) from None
    unique = {}
    for s in specs:
        unique.setdefault(s.case_id, s)
    return list(unique.values())


def results_records(out_dir: str) -> list[dict]:
    """One record per execution of `out_dir`/results.jsonl (none if there is no file)."""
    path = os.path.join(out_dir, "results.jsonl")
    return latest_per_execution(read_results(path)) if os.path.exists(path) else []
