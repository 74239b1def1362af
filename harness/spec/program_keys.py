"""The program keys of a case (DESIGN §7): `program`, `inputs`, `param_shapes`, checked by parsing.

The program is parsed and checked against the language (harness.program);
nothing of it runs.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from harness.program.ir import ProgramCase, ProgramError
from harness.program.parse import parse
from harness.spec.keys import EXTRA_INPUTS, INPUT_KINDS, PROGRAM_PARAMS, RANGES, SpecError, fail, kinded

if TYPE_CHECKING:
    from harness.spec.case import CaseSpec


def _program_case(dtype, weight_dtype, shape, extra_inputs, eps, param_shapes) -> ProgramCase:
    defaults = {n: (shape[-1],) for n in PROGRAM_PARAMS}
    return ProgramCase(dtype=dtype, weight_dtype=weight_dtype, shape=tuple(shape), extra_inputs=tuple(extra_inputs),
                       param_shapes={**defaults, **param_shapes}, eps=eps)


def program_case(spec: "CaseSpec") -> ProgramCase:
    """What the program language needs to know of a program case."""
    return _program_case(spec.dtype, spec.weight_dtype, spec.shape, tuple(n for n, _ in spec.inputs),
                         spec.eps, dict(spec.param_shapes))


def _program(raw: dict, dtype: str, weight_dtype: str, shape: tuple[int, ...], eps: float):
    """(normalised source, extra inputs, parameter shapes) of a program case; SpecError when bad.

    The program is parsed and checked against DESIGN §7's list; nothing of it runs.
    """
    source = raw["program"]
    if not isinstance(source, str) or not source.strip():
        fail("program", "expected the program's source as a non-empty string")
    extra_raw = raw.get("inputs", {})
    if not isinstance(extra_raw, dict):
        fail("inputs", f"expected an object like {{\"y\": {{\"kind\": ...}}}}, got {extra_raw!r}")
    extra = []
    for name in sorted(extra_raw):
        if name not in EXTRA_INPUTS:
            fail(f"inputs.{name}", f"unknown extra input; a program may read {', '.join(EXTRA_INPUTS)}")
        extra.append((name, tuple(kinded(f"inputs.{name}", extra_raw[name], INPUT_KINDS, RANGES).items())))
    shapes_raw = raw.get("param_shapes", {})
    if not isinstance(shapes_raw, dict):
        fail("param_shapes", f"expected an object like {{\"w\": [64]}}, got {shapes_raw!r}")
    for name, dims in shapes_raw.items():
        if name not in PROGRAM_PARAMS:
            fail(f"param_shapes.{name}", f"unknown parameter; a program may read {', '.join(PROGRAM_PARAMS)}")
        if not isinstance(dims, list) or not dims or any(isinstance(d, bool) or not isinstance(d, int) or d < 1
                                                         for d in dims):
            fail(f"param_shapes.{name}", f"expected a non-empty list of positive ints, got {dims!r}")
        if math.prod(dims) > 2**24:
            fail(f"param_shapes.{name}", f"{math.prod(dims)} elements is over the 16M limit")
    case = _program_case(dtype, weight_dtype, shape, tuple(n for n, _ in extra), eps,
                         {k: tuple(v) for k, v in shapes_raw.items()})
    try:
        program = parse(source, case=case)
    except ProgramError as exc:
        raise SpecError(f"spec key 'program': {exc}") from None
    unread = sorted(set(shapes_raw) - set(program.reads))
    if unread:
        fail(f"param_shapes.{unread[0]}", "the program does not read this parameter")
    unread = [n for n, _ in extra if n not in program.reads]
    if unread:
        fail(f"inputs.{unread[0]}", "the program does not read this input")
    pshapes = tuple((n, tuple(case.param_shapes[n])) for n in PROGRAM_PARAMS if n in program.reads)
    return program.source, tuple(extra), pshapes
