"""`make oracle-check`: every benchmark case through every implementation, scored by normdiff and the anchors.

Three benchmarks run: the backward of the catalog's norms (`gradient_bench.cases()`
through `gradient_implementations`, an outcome per gradient), the catalog's norms
(`grid.cases()` through `implementations`) and programs (`program_grid.cases()`
through the renderings of `program_implementations`). For each case the implementations run as registered paths
through the real runner (`Executor.execute`: inputs, FP64 reference, eager,
the path, `compare.score`), which gives normdiff's verdict; the same outputs
(the implementations are deterministic) go to the ground truth and to every
anchor's oracle. Each table says, per oracle, how many materially wrong
outputs it flags and how many correct outputs it flags; the last lines
are normdiff's: `oracle-check gradients: ...`, `oracle-check programs: detected D/W, false alarms A/C`, then
`oracle-check: detected D/W, false alarms A/C` for the catalog. Exit 0 when
normdiff flags at least 99 % of the materially wrong outputs and no correct
one on each, 1 otherwise.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from collections import Counter, defaultdict

import numpy as np

from harness import paths
from harness.benchmark.outcome import NORMDIFF, Outcome
from harness.benchmark import (anchors, gradient_bench, gradient_implementations, grid, implementations, program_grid,
                               program_implementations, truth)
from harness.spec import CaseSpec
from harness.core.verdicts import Verdict
from harness.engine.cases import CaseProblem
from harness.engine.execute import Executor
from harness.oracle.compare import measured_rows

TARGET_DETECTION = 0.99
PROGRAMS = "oracle-check programs"
GRADIENTS = "oracle-check gradients"


class _Runner:
    """Outputs of registered paths, prepared once per structure (the implementations' own outputs)."""

    def __init__(self):
        self._prepared = {}

    def output(self, name: str, spec: CaseSpec, setup) -> np.ndarray:
        path = paths.get(name)
        key = (name, path.structure_key(spec))
        if key not in self._prepared:
            self._prepared[key] = path.prepare(spec, *setup.build())
        return self._prepared[key].run(setup.inputs.run_arg)


def run_case(spec: CaseSpec, names: dict[str, type], executor: Executor, runner: _Runner,
             detail: bool = False) -> list[Outcome]:
    """Every implementation on `spec`: normdiff's verdict, the ground truth, the anchors' flags.

    The case is set up as the runner sets it up (harness.engine.cases: a catalog or program case from
    its spec, a module case resolved and lifted); a module case that cannot be gives no outcomes."""
    try:
        setup = executor.cases.setup(spec)
        problem = setup.problem
    except CaseProblem:
        return []
    if problem is not None:
        return []
    ref = setup.ref
    eager = runner.output("eager", spec, setup)
    records, outputs = {}, {}
    for name in names:
        record = executor.execute(spec, name)
        if record["verdict"] == Verdict.UNSUPPORTED:
            continue
        records[name] = record
        outputs[name] = runner.output(name, spec, setup)
    good = [eager] + [outputs[n] for n in outputs if names[n].correct]
    baseline = truth.baseline_rows(good, ref)
    expected = str(eager.dtype)
    result = []
    for name, out in outputs.items():
        if names[name].correct:
            kind, reason = "correct", None
        else:
            judged = truth.judge(out, ref, expected, baseline)
            kind, reason = ("wrong" if judged.wrong else "left-out"), judged.reason
        record = records[name]
        flags = {NORMDIFF: record["verdict"] != Verdict.PASS}
        if kind != "left-out":
            for anchor, oracle in anchors.ANCHORS.items():
                flags[anchor] = oracle(out, eager, ref.out)
        rows = None
        if detail and kind != "left-out" and record["verdict"] in (Verdict.PASS, Verdict.INACCURATE):
            rows = measured_rows(out, ref, eager)
        result.append(Outcome(spec, name, kind, reason, record["verdict"], record["message"],
                              record.get("max_err_over_tol"), flags, rows))
    return result


def collect(specs: list[CaseSpec], progress: bool = False, names: dict[str, type] | None = None,
            label: str = "oracle-check", detail: bool = False, run=None) -> list[Outcome]:
    """Every implementation in `names` (default: the catalog's) on every spec, each case by `run` (run_case, or
    gradient_bench.run_case: an outcome per gradient)."""
    run = run_case if run is None else run
    names = implementations.register_all() if names is None else names
    executor, runner = Executor(), _Runner()
    outcomes = []
    start = time.perf_counter()
    for i, spec in enumerate(specs, 1):
        outcomes += run(spec, names, executor, runner, detail)
        if progress and (i % 50 == 0 or i == len(specs)):
            print(f"{label}: {i}/{len(specs)} cases, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return outcomes


def tally(outcomes: list[Outcome]) -> dict[str, tuple[int, int, int, int]]:
    """oracle -> (detected, materially wrong, false alarms, correct)."""
    wrong = [o for o in outcomes if o.kind == "wrong"]
    correct = [o for o in outcomes if o.kind == "correct"]
    # the anchors, then any oracle a benchmark adds (the gradients': assert_close against a float32 run)
    extra = dict.fromkeys(k for o in outcomes for k in o.flags if k not in anchors.ANCHORS and k != NORMDIFF)
    oracles = [NORMDIFF] + list(anchors.ANCHORS) + list(extra)
    return {k: (sum(o.flags[k] for o in wrong), len(wrong), sum(o.flags[k] for o in correct), len(correct))
            for k in oracles}


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:5.1f} %" if b else "  n/a"


def render(outcomes: list[Outcome], verbose: bool = False, last_line: bool = True) -> str:
    """The table of one benchmark; its last line normdiff's `oracle-check: ...` unless last_line is False."""
    lines = []
    counts = tally(outcomes)
    lines.append(f"{'oracle':32} {'detected':>18} {'false alarms':>18}")
    for k, (d, w, a, c) in counts.items():
        lines.append(f"{k:32} {f'{d}/{w}':>10} {_pct(d, w)} {f'{a}/{c}':>10} {_pct(a, c)}")
    lines.append("")
    lines.append(f"{'implementation':34} {'wrong':>6} {'left out':>9} {'normdiff flags':>15}")
    per = defaultdict(Counter)
    for o in outcomes:
        per[o.implementation][o.kind] += 1
        per[o.implementation][o.kind + "-flagged"] += o.flags[NORMDIFF]
    for name, c in per.items():
        if c["correct"]:
            lines.append(f"{name:34} {'correct':>6} {'':>9} {c['correct-flagged']:>6}/{c['correct']} alarms")
        else:
            lines.append(f"{name:34} {c['wrong']:>6} {c['left-out']:>9} {c['wrong-flagged']:>6}/{c['wrong']}")
    missed = [o for o in outcomes if o.kind == "wrong" and not o.flags[NORMDIFF]]
    alarms = [o for o in outcomes if o.kind == "correct" and o.flags[NORMDIFF]]
    for title, items in (("missed", missed), ("false alarms", alarms)):
        if items:
            lines.append("")
            lines.append(f"normdiff {title} ({len(items)}):")
            for o in items[: None if verbose else 10]:
                lines.append(f"  {o.implementation} on {o.spec}: {o.verdict}: {o.message[:160]}")
    if last_line:
        lines.append("")
        lines.append(summary(outcomes))
    return "\n".join(lines)


def summary(outcomes: list[Outcome], label: str = "oracle-check") -> str:
    d, w, a, c = tally(outcomes)[NORMDIFF]
    return f"{label}: detected {d}/{w}, false alarms {a}/{c}"


def meets_target(outcomes: list[Outcome]) -> bool:
    d, w, a, c = tally(outcomes)[NORMDIFF]
    return bool(w) and d >= TARGET_DETECTION * w and a == 0


# name -> (its cases, the registration of its implementations, its summary label, how a case runs)
BENCHMARKS = {
    "gradients": (gradient_bench.cases, gradient_implementations.register_all, GRADIENTS, gradient_bench.run_case),
    "programs": (program_grid.cases, program_implementations.register_all, PROGRAMS, run_case),
    "catalog": (grid.cases, implementations.register_all, "oracle-check", run_case),
}


# the last run_benchmarks' seconds per benchmark: its longest shard (what its share of the wall time is)
SECONDS: dict[str, float] = {}


def _shard(task: tuple[str, bool, int, int, bool]) -> tuple[list[Outcome], float]:
    """Shard k of `jobs` of one benchmark (every jobs-th case from the k-th), in this process; and its seconds."""
    which, quick, k, jobs, detail = task
    import torch

    start = time.perf_counter()
    torch.set_num_threads(1)  # small tensors: one thread is faster, and leaves the other cores free
    cases, register, label, run = BENCHMARKS[which]
    where = f" [{k + 1}/{jobs}]" if jobs > 1 else ""
    outcomes = collect(cases(quick=quick)[k::jobs], progress=True, names=register(), label=label + where,
                       detail=detail, run=run)
    return outcomes, time.perf_counter() - start


def run_benchmarks(which: list[str], quick: bool = False, jobs: int = 1,
                   detail: bool = False) -> dict[str, list[Outcome]]:
    """Each named benchmark's outcomes in case order, its cases shared among `jobs` processes."""
    tasks = [(w, quick, k, jobs, detail) for w in which for k in range(jobs)]
    # always in spawned workers: module cases are user code, imported only inside worker processes
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        parts = pool.map(_shard, tasks, chunksize=1)
    out = {}
    for w in which:
        order = {spec.case_id: i for i, spec in enumerate(BENCHMARKS[w][0](quick=quick))}
        mine = [o for t, (part, _) in zip(tasks, parts) if t[0] == w for o in part]
        SECONDS[w] = max(sec for t, (_, sec) in zip(tasks, parts) if t[0] == w)
        out[w] = sorted(mine, key=lambda o: order[o.spec.case_id])  # stable: implementations keep their order
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.benchmark.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the short rows only")
    parser.add_argument("--verbose", action="store_true", help="list every miss and false alarm")
    parser.add_argument("--only", choices=tuple(BENCHMARKS), help="run one of the three benchmarks")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="processes to share the cases among (default: 2, or 1 on one core)")
    parser.add_argument("--sensitivity", action="store_true",
                        help="also tabulate each benchmark over a grid of the rule's multiplier and floor")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        print("oracle-check: --jobs must be at least 1", file=sys.stderr)
        return 2
    which = [args.only] if args.only else list(BENCHMARKS)
    results = run_benchmarks(which, quick=args.quick, jobs=args.jobs, detail=args.sensitivity)
    if args.sensitivity:
        from harness.benchmark.sensitivity import table

        for w, outcomes in results.items():
            print(f"{w}: the rule over its constants (normdiff's detections and false alarms)")
            print(table(outcomes))
            print("")
    programs, catalog, gradients = results.get("programs"), results.get("catalog"), results.get("gradients")
    if gradients is not None:
        print("Gradients (harness/benchmark/gradient_implementations.py over gradient_bench.py; one outcome a gradient)")
        print(render(gradients, verbose=args.verbose, last_line=False))
        if "gradients" in SECONDS:
            print(f"gradients: {len(gradient_bench.cases(quick=args.quick))} cases, the longest of {args.jobs} "
                  f"shards {SECONDS['gradients']:.0f} s")
        print("")
    if catalog is not None:
        print("The catalog's norms (harness/benchmark/implementations.py over grid.py)")
        print(render(catalog, verbose=args.verbose, last_line=False))
        print("")
    if gradients is not None:
        print(summary(gradients, GRADIENTS))
    if programs is not None:
        print("Programs and module cases (harness/benchmark/program_implementations.py over program_grid.py)")
        print(render(programs, verbose=args.verbose, last_line=False))
        modules = [o for o in programs if o.spec.is_module]
        if modules:
            print(summary(modules, "of which module cases (the zoo's sample)"))
        print("")
        print(summary(programs, PROGRAMS))
    if catalog is not None:
        print(summary(catalog))
    return 0 if all(meets_target(o) for o in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
