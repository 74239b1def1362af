"""A case made concrete in a worker: its inputs, its FP64 reference, and the module every path compiles.

A catalog or program case is built from its spec alone. A module case
(docs/contracts.md §8) is resolved here once per structure and worker (the class
imported, built, exported and lifted: harness.modules.module_case); its inputs
take the module's parameters, its reference is the lifted program's, and its
record carries the lifted source and the lift check. What cannot be resolved
is a CaseProblem: the record's verdict, stage and message.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.core.records import LiftCheck
from harness.core.verdicts import Verdict
from harness.oracle.inputs import Inputs, make_inputs
from harness.oracle.reference import Reference, by_position, evaluation_reference, reference
from harness.oracle.witness_error import program_witnesses
from harness.paths.base import StageError, first_line

MODULE_MEMO = 4  # module structures a worker keeps resolved (groups of one structure follow each other)
SETUP_MEMO = 64  # cases whose inputs and reference a worker keeps for the next paths of their structure
LIFTED = "lifted"  # the kind of a kept lifted program in the artifact cache


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
    lift: LiftCheck | None = None  # a module case: its lifted program and the lift check its records carry
    problem: CaseProblem | None = None  # a module case whose lift check fails: its reference is not trusted
    module_case: Any = None
    eager: dict = field(default_factory=dict)  # {"out": eager's output (None: it failed)}, once for every path
    backward: Any = None  # a gradient case: its LiftedBackward (harness.modules.lift_backward), for attribution


def problem_of(exc: BaseException, stage_of_spec: str = "spec") -> CaseProblem:
    """The record a module case's resolution failure gives."""
    from harness.modules import ModuleSpecError, Unliftable

    if isinstance(exc, CaseProblem):
        return exc
    if isinstance(exc, MemoryError):  # the worker's memory limit, not the spec: the case's executions fail
        return CaseProblem(Verdict.ERROR, "lift", f"{exc}" if str(exc) else "lifting failed: MemoryError")
    if isinstance(exc, ModuleSpecError):
        return CaseProblem(Verdict.ERROR, stage_of_spec, str(exc))
    if isinstance(exc, Unliftable):
        return CaseProblem(Verdict.UNSUPPORTED, None, str(exc))
    if isinstance(exc, StageError):
        return CaseProblem(Verdict.ERROR, exc.stage, exc.message)
    return CaseProblem(Verdict.ERROR, "lift", f"lifting failed: {first_line(exc)}")


class Cases:
    """Per worker: each case's Setup, kept for the next paths of its structure (the last SETUP_MEMO); module
    cases resolved once per structure (the last MODULE_MEMO kept), their lifted programs kept in `cache`."""

    def __init__(self, cache=None):
        self.cache = cache
        self._modules: OrderedDict[str, Any] = OrderedDict()
        self._sized: OrderedDict[tuple, Any] = OrderedDict()  # a symbolic structure's ModuleCase at other sizes
        self._setups: OrderedDict[str, tuple[Any, Setup]] = OrderedDict()
        self._backwards: dict[str, Any] = {}  # a gradient case's lifted backward, by structure (engine.gradients)

    def module_case(self, spec):
        """The ModuleCase of `spec`'s structure, resolved at most once; a CaseProblem if it cannot be. A symbolic
        case's sizes share the structure's resolution, its program checked at each size (ModuleCase.at)."""
        case = self._structure_case(spec)
        if not spec.dynamic or case.spec.shape == spec.shape:
            return case
        return _memoized(self._sized, (spec.structure_key(), spec.shape), lambda: case.at(spec), SETUP_MEMO)

    def _structure_case(self, spec):
        return _memoized(self._modules, spec.structure_key(), lambda: self._resolve(spec), MODULE_MEMO)

    def _resolve(self, spec):
        """harness.modules.module_case.resolve, its lifted program read from the cache when kept there (the class
        is built either way: the paths and the lift check need it, and its code is part of the key)."""
        from harness.modules.module_case import Resolved, build_case, resolve, restore

        if self.cache is None:
            return resolve(spec)
        from harness.modules.fingerprint import code_digest

        built = build_case(spec)
        key = self.cache.derived_key(LIFTED, structure=spec.structure_key(), code=code_digest(type(built.module)),
                                     versions=lift_versions())
        entry = self.cache.get(key)
        if entry is not None:
            try:
                return restore(spec, built, Resolved.from_dict(json.loads(entry.data)))
            except Exception:  # noqa: BLE001 - a kept lift that does not restore is dropped and made again
                self.cache.discard(key)
        case = resolve(spec, built)
        self.cache.put(key, LIFTED, json.dumps(case.resolved.to_dict()).encode(), {})
        return case

    def setup(self, spec) -> Setup:
        key = spec.case_id
        kept = self._setups.get(key)
        if kept is not None and kept[0] == spec:
            self._setups.move_to_end(key)
            return kept[1]
        made = self._setup(spec)
        self._setups[key] = (spec, made)
        while len(self._setups) > SETUP_MEMO:
            self._setups.popitem(last=False)
        return made

    def _setup(self, spec) -> Setup:
        if spec.grad:
            return self._gradient_setup(spec)
        if not spec.is_module:
            inputs = make_inputs(spec)
            return Setup(inputs, reference(spec, inputs), lambda: _catalog_build(spec, inputs))
        from harness.program import evaluate

        mc = self.module_case(spec)
        inputs = mc.inputs(make_inputs(spec))
        arrays = mc.reference_arrays(inputs)
        evaluation = evaluate(mc.program, mc.case, arrays)
        lift = LiftCheck(program=mc.resolved.source, lifted_pattern=mc.resolved.pattern,
                         **mc.lift_check(inputs, evaluation))
        witnesses = program_witnesses(spec.case_id, mc.program, mc.case, arrays)  # the lifted program's
        return Setup(inputs, by_position(evaluation_reference(evaluation, witnesses)),
                     lambda: (mc.build(), mc.example(inputs, spec.layout)), lift, lift_problem(lift), mc)

    def lifted_backward(self, spec):
        """The LiftedBackward (harness.modules.lift_backward) of gradient case `spec`'s structure, once its setup
        was made here (its program's names for the inputs, the cotangents and the module's state); None before."""
        return self._backwards.get(spec.structure_key())

    def _gradient_setup(self, spec) -> Setup:
        """A gradient case's Setup (harness.engine.gradients): its backward lifted from torch's joint graph, a
        CaseProblem where that cannot be done or its check against float64 autograd fails."""
        from harness.engine.gradients import gradient_parts

        if len(self._backwards) > MODULE_MEMO:
            self._backwards.pop(next(iter(self._backwards)))
        mc = None
        if spec.is_module:
            mc = self.module_case(spec)
            inputs, names = mc.inputs(make_inputs(spec)), mc.resolved.called
            make_forward = mc.build
        else:
            inputs = make_inputs(spec)
            names = ("x", *(inputs.order if inputs.order is not None else sorted(inputs.extra)))
            make_forward = lambda: _catalog_build(spec, inputs)[0]  # noqa: E731 - a fresh module per call
        try:
            parts = gradient_parts(spec, make_forward, inputs, tuple(names), self._backwards, self.cache,
                                   mc.digest if mc is not None else "", lift_versions() if self.cache else None)
        except Exception as exc:  # noqa: BLE001 - user code and torch's tracing: every failure is one record
            raise problem_of(exc) from None
        return Setup(parts.inputs, parts.ref, parts.build, parts.lift, lift_problem(parts.lift), mc,
                     backward=parts.lifted)


def lift_versions() -> dict:
    """The versions a lifted program depends on besides the class's code: torch's export."""
    from harness.paths import installed_version

    return {"torch": installed_version("torch")}


def _catalog_build(spec, inputs):
    from harness.core.tensors import to_torch
    from harness.oracle.modules import build_module  # torch: imported where a case is built, not by the CLI

    module = build_module(spec, inputs.params)
    example = (tuple(to_torch(a, spec.layout) for a in inputs.run_arg) if inputs.extra
               else to_torch(inputs.x, spec.layout))
    return module, example


def lift_problem(lift: LiftCheck) -> CaseProblem | None:
    """The lift check's verdict on a module case: an `error` at stage `lift` when the lifted program and the
    module's own float64 run disagree by more than LIFT_SHARE of the bound anywhere."""
    from harness.modules.lift_check import LIFT_SHARE

    why = lift.problem(LIFT_SHARE)
    return None if why is None else CaseProblem(Verdict.ERROR, "lift", why)


def _memoized(table, key, make, limit: int):
    """table[key], made by make() once and kept (the newest `limit`); user code's failure is kept as its
    CaseProblem and raised again at each look-up, so a class that fails costs one attempt per structure."""
    if key not in table:
        try:
            table[key] = make()
        except Exception as exc:  # noqa: BLE001 - user code: every failure is one record
            table[key] = problem_of(exc)
        while len(table) > limit:
            table.popitem(last=False)
    table.move_to_end(key)
    found = table[key]
    if isinstance(found, CaseProblem):
        raise found
    return found
