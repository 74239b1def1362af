"""A catalog case's program twin: the same norm written as its style's program (docs/contracts.md §7).

The twin draws the same input and the same parameters (w and b from the
stream weight and bias come from, in that order), and its program is the
very text the style case's module runs (`style_case`, harness.oracle.modules),
so a style case and its twin give the same output through every path. What may
differ is the bound: the twin's comes from the program's running error
analysis, the style case's from the closed-form model (docs/tolerance.md).
"""
from __future__ import annotations

from harness.spec import CaseSpec
from harness.program import Program, ProgramCase, parse, style_program

# The catalog styles that have a program: every hand-written style, and the
# layer_norm/rms_norm modules (as F.layer_norm / F.rms_norm).
TWIN_PATTERNS = ("layer_norm", "rms_norm")
# A catalog parameter's name in its style's program.
PROGRAM_NAMES = {"weight": "w", "bias": "b"}


def style_case(spec: CaseSpec) -> tuple[str, ProgramCase]:
    """(program text, ProgramCase) of a catalog layer_norm/rms_norm case: the program its module runs.

    ValueError for a case whose pattern has no style program (group, instance, batch norm).
    """
    if spec.program is not None or spec.pattern not in TWIN_PATTERNS:
        raise ValueError(f"no style program for a {spec.pattern} {spec.style} case")
    text = style_program(spec.pattern, spec.style, spec.cast, spec.affine, spec.dtype, spec.weight_dtype)
    return text, ProgramCase(spec.dtype, tuple(spec.shape), spec.weight_dtype, eps=spec.eps)


def parsed_style_case(spec: CaseSpec) -> tuple[Program, ProgramCase]:
    """(Program, ProgramCase) of a catalog layer_norm/rms_norm case: `style_case`'s program parsed (once per
    process: the styles have a few texts for every catalog case) and checked against the case."""
    text, case = style_case(spec)
    return parse(text, case=case), case


def has_twin(spec: CaseSpec) -> bool:
    return spec.program is None and spec.pattern in TWIN_PATTERNS and spec.layout == "contiguous"


def program_twin(spec: CaseSpec) -> CaseSpec | None:
    """The program twin of a catalog case, or None (a program already, or a style with no program)."""
    if not has_twin(spec):
        return None
    raw = {
        "pattern": spec.pattern, "dtype": spec.dtype, "shape": list(spec.shape), "eps": spec.eps,
        "input": spec.input_dict, "params": spec.params_dict, "seed": spec.seed,
        "program": style_case(spec)[0],
    }
    if spec.weight_dtype != spec.dtype:
        raw["weight_dtype"] = spec.weight_dtype
    return CaseSpec.from_dict(raw)
