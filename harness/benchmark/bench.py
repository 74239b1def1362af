"""`make oracle-check`: every benchmark case through every implementation, scored by normdiff and the anchors.

For each case of `grid.cases()` the implementations run as registered paths
through the real runner (`Executor.execute`: inputs, FP64 reference, eager,
the path, `compare.score`), which gives normdiff's verdict; the same outputs
(the implementations are deterministic) go to the ground truth and to every
anchor's oracle. The table says, per oracle, how many materially wrong
outputs it flags and how many correct outputs it flags; the last line is
normdiff's: `oracle-check: detected D/W, false alarms A/C`. Exit 0 when
normdiff flags at least 99 % of the materially wrong outputs and no correct
one, 1 otherwise.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from harness import paths
from harness.benchmark import anchors, grid, implementations, truth
from harness.spec import CaseSpec
from harness.core.tensors import to_torch
from harness.core.verdicts import Verdict
from harness.engine.execute import Executor
from harness.oracle.inputs import make_inputs
from harness.oracle.modules import build_module
from harness.oracle.reference import reference

TARGET_DETECTION = 0.99
NORMDIFF = "normdiff"


@dataclass
class Outcome:
    """One implementation's output on one case: what it is and who flags it."""

    spec: CaseSpec
    implementation: str
    kind: str                 # "correct", "wrong" (materially wrong) or "left-out"
    reason: Verdict | None    # the ground truth's verdict for a materially wrong output
    verdict: Verdict          # normdiff's verdict
    message: str
    over_tol: float | None    # normdiff's largest error in units of its bound
    flags: dict[str, bool] = field(default_factory=dict)


class _Runner:
    """Outputs of registered paths, prepared once per structure (the implementations' own outputs)."""

    def __init__(self):
        self._prepared = {}

    def output(self, name: str, spec: CaseSpec, inputs) -> np.ndarray:
        path = paths.get(name)
        key = (name, path.structure_key(spec))
        if key not in self._prepared:
            module = build_module(spec, inputs.params)
            self._prepared[key] = path.prepare(spec, module, to_torch(inputs.x, spec.layout))
        return self._prepared[key].run(inputs.x)


def run_case(spec: CaseSpec, names: dict[str, type], executor: Executor, runner: _Runner) -> list[Outcome]:
    """Every implementation on `spec`: normdiff's verdict, the ground truth, the anchors' flags."""
    inputs = make_inputs(spec)
    ref = reference(spec, inputs)
    eager = runner.output("eager", spec, inputs)
    records, outputs = {}, {}
    for name in names:
        record = executor.execute(spec, name)
        if record["verdict"] == Verdict.UNSUPPORTED:
            continue
        records[name] = record
        outputs[name] = runner.output(name, spec, inputs)
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
        result.append(Outcome(spec, name, kind, reason, record["verdict"], record["message"],
                              record.get("max_err_over_tol"), flags))
    return result


def collect(specs: list[CaseSpec], progress: bool = False) -> list[Outcome]:
    names = implementations.register_all()
    executor, runner = Executor(), _Runner()
    outcomes = []
    start = time.perf_counter()
    for i, spec in enumerate(specs, 1):
        outcomes += run_case(spec, names, executor, runner)
        if progress and (i % 50 == 0 or i == len(specs)):
            print(f"oracle-check: {i}/{len(specs)} cases, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return outcomes


def tally(outcomes: list[Outcome]) -> dict[str, tuple[int, int, int, int]]:
    """oracle -> (detected, materially wrong, false alarms, correct)."""
    wrong = [o for o in outcomes if o.kind == "wrong"]
    correct = [o for o in outcomes if o.kind == "correct"]
    oracles = [NORMDIFF] + list(anchors.ANCHORS)
    return {k: (sum(o.flags[k] for o in wrong), len(wrong), sum(o.flags[k] for o in correct), len(correct))
            for k in oracles}


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:5.1f} %" if b else "  n/a"


def render(outcomes: list[Outcome], verbose: bool = False) -> str:
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
    d, w, a, c = counts[NORMDIFF]
    lines.append("")
    lines.append(f"oracle-check: detected {d}/{w}, false alarms {a}/{c}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.benchmark.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the short rows only")
    parser.add_argument("--verbose", action="store_true", help="list every miss and false alarm")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # small tensors: one thread is faster, and leaves the other core free
    outcomes = collect(grid.cases(quick=args.quick), progress=True)
    print(render(outcomes, verbose=args.verbose))
    d, w, a, c = tally(outcomes)[NORMDIFF]
    return 0 if w and d >= TARGET_DETECTION * w and a == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
