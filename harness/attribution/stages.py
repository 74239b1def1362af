"""The program stages of a case: its program (or its catalog style's), evaluated in FP64 with its norms opened.

A program case has its own program. A catalog layer_norm or rms_norm case
has the program of its style (harness.oracle.twins.style_case: the program
its module runs), and
a group_norm module is `F.group_norm(x, groups, w, b, eps)`; their input
and parameters are the case's own (weight and bias read as w and b), in any
layout, since the stages are logical values. instance_norm and batch_norm
have no program: their executions say so.

A gradient case's stages are its lifted backward's (BackwardCase:
harness.modules.lift_backward, torch's joint graph decomposed and lifted),
evaluated with the bound its gradients are scored with: the cotangent walk
(harness.oracle.cotangent_walk) for the sums over rows when the cotangent is
symmetric, so that each gradient's stage has the very bound its output is
held to (docs/attribution.md "The backward").
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Callable, NamedTuple

from harness.attribution.match import canonical
from harness.oracle import cotangent_walk
from harness.spec import CaseSpec, program_case
from harness.oracle.twins import PROGRAM_NAMES, TWIN_PATTERNS, parsed_style_case
from harness.paths.base import IntermediatesUnavailable
from harness.program import Program, ProgramCase, parse
from harness.program.expand import ExpandingWalker, is_part
from harness.program.interpret import evaluate


class ProgramStage(NamedTuple):
    """A stage as attribution uses it: a unique label, canonical op, the program's dtype, FP64 value, bound."""
    label: str
    op: str
    dtype: str
    value: object
    err: object
    part: bool  # a norm's part (one way to compute it), not a stage the program writes
    # A program of several outputs (`return normed, h`): the position of the output this stage gives; None for
    # every other stage, and for every stage of a program of one output (its last stage is its output).
    returns: int | None = None


@dataclass(frozen=True)
class BackwardCase:
    """What attribution needs of a gradient case beyond its spec and inputs: its lifted backward (a
    harness.modules.lift_backward.LiftedBackward: program, case, the names it reads) and `build`, () -> (the
    case's Backward module, its example: the inputs then the cotangents, as tensors), as every path gets them."""
    lifted: object
    build: Callable[[], tuple]

    @cached_property
    def built(self) -> tuple:
        """build()'s (module, example), made once: the stages read its parameters, the path's hook compiles it."""
        return self.build()


def case_program(spec: CaseSpec) -> tuple[Program, ProgramCase]:
    """(Program, ProgramCase) of a case; IntermediatesUnavailable if its pattern has no program."""
    if spec.program is not None:
        return spec.parsed_program, program_case(spec)
    if spec.pattern in TWIN_PATTERNS:
        return parsed_style_case(spec)
    if spec.pattern == "group_norm":
        w, b = ("w" if spec.affine != "none" else "None"), ("b" if spec.affine == "weight_bias" else "None")
        params = {name: (spec.shape[1],) for name in ("w", "b")}
        case = ProgramCase(spec.dtype, tuple(spec.shape), spec.weight_dtype, (), params, spec.eps)
        return parse(f"return F.group_norm(x, {spec.groups}, {w}, {b}, eps)", case=case), case
    raise IntermediatesUnavailable(f"no program for the {spec.pattern} module (running statistics or per-instance norms "
                      "are not in the program language)")


def case_arrays(spec: CaseSpec, inputs) -> dict:
    """The arrays a case's program reads, by name."""
    if spec.program is not None:
        return {**inputs.arrays, **inputs.params}
    return {"x": inputs.x, **{PROGRAM_NAMES[k]: v for k, v in inputs.params.items() if k in PROGRAM_NAMES}}


def labelled(stages) -> list[ProgramStage]:
    """Stages with unique labels "<statement>:<op>" (a repeat gets "#2", "#3", …)."""
    seen: dict[str, int] = {}
    out = []
    for s in stages:
        label = f"{s.name}:{s.op}"
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label = f"{label}#{seen[label]}"
        out.append(ProgramStage(label, canonical(s.op), s.dtype, s.value, s.err, is_part(s)))
    return out


def walker_of(spec: CaseSpec, n_cotangents: int) -> type:
    """The walker of a case's stages: a norm's parts opened (harness.program.expand); for a gradient case whose
    cotangent is symmetric, the sums over rows walked too, as its reference's bound is (harness.engine.gradients)."""
    if not spec.grad or not cotangent_walk.symmetric(spec.cotangent_dict):
        return ExpandingWalker
    from harness.modules.lift_backward import cotangent_names  # the lifter's modules: only for a gradient case

    return _expanding_cotangent_walker(cotangent_names(n_cotangents))


@lru_cache(maxsize=None)
def _expanding_cotangent_walker(cotangents: tuple[str, ...]) -> type:
    """ExpandingWalker with the cotangent walk over `cotangents`: one class for each tuple of names."""
    return type("ExpandingCotangentWalker", (ExpandingWalker, cotangent_walk.walker(cotangents)), {})


def program_stages(spec: CaseSpec, inputs, module_case=None, backward: BackwardCase | None = None
                   ) -> list[ProgramStage]:
    """Every stage of the case's program in program order, norms opened into their parts; a module case's
    program is its lifted one (`module_case`: harness.modules.module_case.ModuleCase), a gradient case's its
    lifted backward (`backward`), reading the inputs, the cotangents and the module's parameters."""
    if backward is not None:
        program, info = backward.lifted.program, backward.lifted.case
        arrays = backward.lifted.arrays(inputs.run_arg, backward.built[0].forward_module)
    elif module_case is not None:
        program, info, arrays = module_case.program, module_case.case, module_case.reference_arrays(inputs)
    else:
        program, info = case_program(spec)
        arrays = case_arrays(spec, inputs)
    evaluation = evaluate(program, info, arrays, keep_stages=True,
                          walker_class=walker_of(spec, len(inputs.cotangents or ())))
    stages = labelled(evaluation.stages)
    for k, each in enumerate(evaluation.outputs):  # several outputs: the stage that gives each
        # the walker hands a stage's value array on as the value itself, so the output is that very array (the last
        # stage holding it: an exact cast holds its operand's array); an input returned as it is has no stage
        at = next((i for i in range(len(stages) - 1, -1, -1) if evaluation.stages[i].value is each.out), None)
        if at is not None and stages[at].returns is None:
            stages[at] = stages[at]._replace(returns=k)
    return stages
