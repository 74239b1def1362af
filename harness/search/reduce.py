"""`normdiff reduce`: the smallest program that still fails on a path the same way (docs/reduce.md).

A reduction works on programs only: a program case is one, a catalog style
case has its program twin (harness/oracle/twins.py), and a module case is
reduced through its lifted program (resolved in a worker: it is user code),
so nothing but programs of the language is ever edited or run reduced. The
program form must fail as the target does before anything is reduced.

"The same way" is the target's verdict on the path (and for an `error`, its
stage), with eager passing: for `inaccurate`, the one output of the case is
over its bound. Each round makes every one-step candidate
(harness/search/reduce_steps.py), smallest first, and judges them in chunks
on the warm workers: the first chunk that holds a failing candidate gives
the smallest failing one of the round (every later chunk holds larger ones),
which is accepted. Rounds go on until none is accepted (a fixed point) or the
budget of rounds ends. The same target gives the same steps and bytes: the
candidates' order is a function of the specs alone, and records are
deterministic.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Callable

from harness.core.verdicts import FAILING, Verdict
from harness.engine.plan import Task
from harness.search.reduce_steps import candidates, count_ops
from harness.spec import CaseSpec

MAX_ROUNDS = 40  # accepted steps at most
MAX_CANDIDATES = 48  # judged per round at most (the smallest first)
CHUNK = 6  # candidates judged in one batch: each path's worker takes them back to back
CONTROL = "eager"  # the path that must keep passing
KEEP_STRUCTURES = 64  # artifacts a worker keeps before it drops them all: every candidate is a structure of its own


class NotReducible(Exception):
    """The target cannot be reduced on this path (one line: it passes, eager fails, no program form, …)."""


@dataclass(frozen=True)
class Step:
    """An accepted reduction: what it did, and the case it left."""
    number: int
    what: str
    ops: int
    record: dict

    def line(self) -> str:
        return f"step {self.number}: {self.what}: {self.ops} ops left, {describe(self.record)}"


@dataclass
class Outcome:
    start: CaseSpec  # the target's program form
    spec: CaseSpec  # the reduced program case (the start when nothing smaller fails the same way)
    record: dict  # its record on the path
    steps: list[Step] = field(default_factory=list)
    judged: int = 0  # candidates run
    rounds: int = 0
    exhausted: bool = False  # the budget of rounds ended before a fixed point
    seconds: float = 0.0

    @property
    def ops(self) -> tuple[int, int]:
        return count_ops(self.start), count_ops(self.spec)


def describe(record: dict) -> str:
    """How a failure shows: the error over the bound, or the verdict (and stage)."""
    over = record.get("max_err_over_tol")
    if record["verdict"] == Verdict.INACCURATE and isinstance(over, (int, float)):
        return f"max error {over:.3g}x the bound"
    stage = f" at {record['stage']}" if record.get("stage") else ""
    return f"{record['verdict']}{stage}"


def same_failure(target: dict, record: dict, control: dict) -> bool:
    """`record` fails as `target` did (verdict, and stage for an error) while the control passes."""
    if control["verdict"] != Verdict.PASS or record["verdict"] != target["verdict"]:
        return False
    return record["verdict"] != Verdict.ERROR or record.get("stage") == target.get("stage")


class Judge:
    """Runs specs on the path and on eager (one batch), memoised by case_id."""

    def __init__(self, run_tasks: Callable[[list[Task]], list[dict]], path: str):
        self.run_tasks = run_tasks
        self.path = path
        self.memo: dict[str, tuple[dict, dict]] = {}
        self.executions = 0

    def __call__(self, specs: list[CaseSpec]) -> list[tuple[dict, dict]]:
        """(the path's record, eager's record) of each spec."""
        new = list({s.case_id: s for s in specs if s.case_id not in self.memo}.values())
        if new:
            tasks = [Task(s, p, False) for s in new for p in (self.path, CONTROL)]
            out = self.run_tasks(tasks)
            self.executions += len(out)
            for i, s in enumerate(new):
                self.memo[s.case_id] = (out[2 * i], out[2 * i + 1])
        return [self.memo[s.case_id] for s in specs]


def program_form(spec: CaseSpec, lift: Callable[[CaseSpec], dict]) -> CaseSpec:
    """The program a case is reduced as: itself, a catalog case's twin, or a module case's lifted program
    (`lift` resolves the module case in a worker and gives its LIFT record)."""
    from harness.modules.lifted_spec import program_spec
    from harness.oracle.twins import program_twin

    if spec.program is not None:
        return spec
    if spec.is_module:
        record = lift(spec)
        if record["verdict"] != Verdict.PASS:
            raise NotReducible(record.get("message") or f"{spec.cls}: {record['verdict']} while it was lifted")
        return CaseSpec.from_dict(program_spec(spec, record)[0])
    twin = program_twin(spec)
    if twin is None:
        raise NotReducible(f"{spec.case_id}: a {spec.pattern} {spec.style} case ({spec.layout}) has no program form "
                           "to reduce")
    return twin


def check_target(target: CaseSpec, form: CaseSpec, judge: Judge) -> dict:
    """The target's record on the path, once it is shown to fail there with eager passing, and its program
    form to fail the same way; NotReducible (one line) otherwise."""
    specs = [target] if form.case_id == target.case_id else [target, form]
    results = judge(specs)
    record, control = results[0]
    if record["verdict"] not in FAILING:
        raise NotReducible(f"{target.case_id} does not fail on {judge.path} ({record['verdict']}): nothing to reduce")
    if control["verdict"] != Verdict.PASS:
        raise NotReducible(f"{target.case_id}: eager gives {control['verdict']} too, so the failure is not "
                           f"{judge.path}'s (an unstable pattern); reduce keeps eager passing")
    if len(results) > 1:
        form_record, form_control = results[1]
        if not same_failure(record, form_record, form_control):
            raise NotReducible(f"{target.case_id}: its program form ({form.case_id}) does not fail the same way on "
                               f"{judge.path}: {describe(form_record)}, eager {form_control['verdict']} "
                               f"(the target: {describe(record)})")
        return form_record
    return record


def reduce_failure(spec: CaseSpec, path: str, run_tasks: Callable[[list[Task]], list[dict]], *,
                   max_rounds: int = MAX_ROUNDS, max_candidates: int = MAX_CANDIDATES, chunk: int = CHUNK,
                   say: Callable[[str], None] = lambda line: None) -> Outcome:
    """Reduce case `spec` (a program, catalog or module case) failing on `path`, its executions run by
    `run_tasks` (a warm pool's `map`): its program form checked, then reduced; NotReducible when it cannot be."""
    from harness.modules import LIFT

    judge = Judge(run_tasks, path)
    form = program_form(spec, lambda s: run_tasks([Task(s, LIFT)])[0])
    record = check_target(spec, form, judge)
    say(f"{spec} on {path}: {record['verdict']}, {count_ops(form)} ops, {describe(record)}")
    return reduce(form, record, judge, max_rounds=max_rounds, max_candidates=max_candidates, chunk=chunk, say=say)


def spec_text(spec: CaseSpec) -> str:
    """A reduced spec as a file holds it: the normalised spec's keys in their order, one per line."""
    return "{" + ",\n ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in spec.to_dict().items()) + "}\n"


def reduced_file(folder: str, case_id: str, path: str) -> str:
    """Where `harness.check(reduce=…)` and the pytest plugin keep the reduction of one failing execution."""
    return os.path.join(folder, f"reduced-{case_id}-{path}.json")


def reduce_into(folder: str, spec: CaseSpec, path: str, run_tasks: Callable[[list[Task]], list[dict]]) -> str:
    """Reduce a failing execution and write the spec to `folder`: one line saying where and how small, or why
    it was not reduced (the entry points' message)."""
    from harness.core.records import write_atomic

    try:
        outcome = reduce_failure(spec, path, run_tasks)
    except NotReducible as exc:
        return f"not reduced: {exc}"
    os.makedirs(folder, exist_ok=True)
    file = reduced_file(folder, spec.case_id, path)
    write_atomic(file, spec_text(outcome.spec))
    before, after = outcome.ops
    return f"reduced ({before} -> {after} ops, {describe(outcome.record)}): {file}"


def reduce(start: CaseSpec, record: dict, judge: Judge, *, max_rounds: int = MAX_ROUNDS,
           max_candidates: int = MAX_CANDIDATES, chunk: int = CHUNK,
           say: Callable[[str], None] = lambda line: None) -> Outcome:
    """Reduce program case `start`, whose record on the judge's path is `record` (a failure, eager passing),
    to a fixed point of the one-step reductions."""
    clock = time.monotonic()
    outcome = Outcome(start, start, record)
    current, target = start, record
    for _ in range(max_rounds):
        outcome.rounds += 1
        chosen = _round(current, target, judge, max_candidates, chunk, outcome)
        if chosen is None:
            break
        candidate, record = chosen
        current = candidate.spec
        step = Step(len(outcome.steps) + 1, candidate.what, count_ops(current), record)
        outcome.steps.append(step)
        say(step.line())
    else:
        outcome.exhausted = True
    outcome.spec, outcome.record = current, record
    outcome.seconds = time.monotonic() - clock
    return outcome


def _round(current: CaseSpec, target: dict, judge: Judge, max_candidates: int, chunk: int, outcome: Outcome):
    """The smallest one-step candidate that fails the same way, with its record; None at a fixed point."""
    pending = candidates(current)[:max_candidates]
    for i in range(0, len(pending), chunk):
        batch = pending[i:i + chunk]
        outcome.judged += sum(1 for c in batch if c.spec.case_id not in judge.memo)
        for c, (record, control) in zip(batch, judge([c.spec for c in batch])):
            if same_failure(target, record, control):
                return c, record
    return None


__all__ = ["CHUNK", "CONTROL", "KEEP_STRUCTURES", "Judge", "MAX_CANDIDATES", "MAX_ROUNDS", "NotReducible", "Outcome", "Step",
           "check_target", "describe", "program_form", "reduce", "reduce_failure", "reduce_into", "reduced_file",
           "same_failure", "spec_text"]
