"""A case made concrete in a worker: its inputs, its FP64 reference, and the module every path compiles.

A catalog or program case is built from its spec alone. A module case
(DESIGN §8) is resolved here once per structure and worker (the class
imported, built, exported and lifted: harness.modules.resolve); its inputs
take the module's parameters, its reference is the lifted program's, and its
record carries the lifted source and the lift check. What cannot be resolved
is a CaseProblem: the record's verdict, stage and message.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.core.verdicts import Verdict
from harness.oracle.inputs import Inputs, make_inputs
from harness.oracle.modules import build_module
from harness.oracle.reference import Reference, evaluation_reference, reference
from harness.oracle.witness import program_witnesses
from harness.paths.base import StageError, first_line

MODULE_MEMO = 4  # module structures a worker keeps resolved (groups of one structure follow each other)


class CaseProblem(Exception):
    """A case that cannot be set up: the record's verdict, stage and message."""

    def __init__(self, verdict: str, stage: str | None, message: str):
        super().__init__(message)
        self.verdict, self.stage, self.message = verdict, stage, message


@dataclass
class Setup:
    """What an execution needs of its case."""
    inputs: Inputs
    ref: Reference
    build: Callable[[], tuple[Any, Any]]  # -> (a fresh eval module, its example tensors)
    record: dict = field(default_factory=dict)  # keys a module case adds to its records
    module_case: Any = None


def problem_of(exc: BaseException, stage_of_spec: str = "spec") -> CaseProblem:
    """The record a module case's resolution failure gives."""
    from harness.modules import ModuleSpecError, Unliftable

    if isinstance(exc, CaseProblem):
        return exc
    if isinstance(exc, ModuleSpecError):
        return CaseProblem(Verdict.ERROR, stage_of_spec, str(exc))
    if isinstance(exc, Unliftable):
        return CaseProblem(Verdict.UNSUPPORTED, None, str(exc))
    if isinstance(exc, StageError):
        return CaseProblem(Verdict.ERROR, exc.stage, exc.message)
    return CaseProblem(Verdict.ERROR, "lift", f"lifting failed: {first_line(exc)}")


class Cases:
    """Per worker: each spec's Setup; module cases resolved once per structure (the last MODULE_MEMO kept)."""

    def __init__(self):
        self._modules: OrderedDict[str, Any] = OrderedDict()

    def module_case(self, spec):
        """The ModuleCase of `spec`'s structure, resolved at most once; a CaseProblem if it cannot be."""
        key = spec.structure_key()
        if key not in self._modules:
            from harness.modules.resolve import resolve

            try:
                self._modules[key] = resolve(spec)
            except Exception as exc:  # noqa: BLE001 - user code: every failure is one record
                self._modules[key] = problem_of(exc)
            while len(self._modules) > MODULE_MEMO:
                self._modules.popitem(last=False)
        self._modules.move_to_end(key)
        case = self._modules[key]
        if isinstance(case, CaseProblem):
            raise case
        return case

    def setup(self, spec) -> Setup:
        if not spec.is_module:
            inputs = make_inputs(spec)
            return Setup(inputs, reference(spec, inputs), lambda: _catalog_build(spec, inputs))
        from harness.program import evaluate

        mc = self.module_case(spec)
        inputs = mc.inputs(make_inputs(spec))
        arrays = mc.reference_arrays(inputs)
        evaluation = evaluate(mc.program, mc.case, arrays)
        record = {"program": mc.resolved.source, "lifted_pattern": mc.resolved.pattern,
                  **mc.lift_check(inputs, evaluation)}
        witnesses = program_witnesses(spec.case_id, mc.program, mc.case, arrays)  # the lifted program's
        return Setup(inputs, evaluation_reference(evaluation, witnesses),
                     lambda: (mc.build(), mc.example(inputs, spec.layout)), record, mc)


def _catalog_build(spec, inputs):
    from harness.core.tensors import to_torch

    module = build_module(spec, inputs.params)
    example = (tuple(to_torch(a, spec.layout) for a in inputs.run_arg) if inputs.extra
               else to_torch(inputs.x, spec.layout))
    return module, example


def lift_problem(record: dict) -> CaseProblem | None:
    """The lift check's verdict on a module case's record: an `error` at stage `lift` when the lifted program
    and the module's own float64 run disagree by more than LIFT_SHARE of the bound anywhere."""
    from harness.modules.check import LIFT_SHARE

    share = record.get("lift_check_over_bound")
    if share is None or share <= LIFT_SHARE:
        return None
    return CaseProblem(Verdict.ERROR, "lift", f"the lifted program disagrees with the module run in float64: "
                       f"{record['lift_check']:.3g} relative, {share:.3g}x its bound (over {LIFT_SHARE:g}); "
                       "its reference is not trusted")
