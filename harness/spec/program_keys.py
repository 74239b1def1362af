"""The program keys of a case (docs/contracts.md §7): `program`, `inputs`, `param_shapes`, checked by parsing.

The program is parsed and checked against the language (harness.program);
nothing of it runs.
"""
from __future__ import annotations

from harness.program.ir import RESERVED_NAMES, ProgramCase, ProgramError, param_order
from harness.program.parse import parse
from harness.spec.keys import (
    EXTRA_INPUTS, PARAM_KINDS, PROGRAM_PARAMS, SpecError, dims_list, fail, identifier, input_object, kinded, number,
)


def input_types(extra) -> dict:
    """{name: (shape, dtype)} of the extra inputs whose object gives its own shape or dtype."""
    return {name: (dict(obj).get("shape"), dict(obj).get("dtype")) for name, obj in extra
            if "shape" in dict(obj) or "dtype" in dict(obj)}


def _program_case(dtype, weight_dtype, shape, extra, eps, param_shapes) -> ProgramCase:
    defaults = {n: (shape[-1],) for n in PROGRAM_PARAMS}
    types = {n: (s or tuple(shape), d or dtype) for n, (s, d) in input_types(extra).items()}
    return ProgramCase(dtype=dtype, weight_dtype=weight_dtype, shape=tuple(shape),
                       extra_inputs=tuple(n for n, _ in extra), param_shapes={**defaults, **param_shapes}, eps=eps,
                       input_types=types)


def program_case(spec) -> ProgramCase:
    """What the program language needs to know of a program case (a CaseSpec)."""
    return _program_case(spec.dtype, spec.weight_dtype, spec.shape, spec.inputs, spec.eps, dict(spec.param_shapes))


def parsed_program(spec):
    """The Program of a program case (a CaseSpec), checked against its case: what CaseSpec.parsed_program
    holds when the spec was not made by `from_dict` (which parsed it already)."""
    return parse(spec.program, case=program_case(spec))


def _program(raw: dict, dtype: str, weight_dtype: str, shape: tuple[int, ...], eps: float):
    """(the parsed Program, extra inputs, parameter shapes) of a program case; SpecError when bad.

    The program is parsed and checked against docs/contracts.md §7's list; nothing of it runs.
    """
    source = raw["program"]
    if not isinstance(source, str) or not source.strip():
        fail("program", "expected the program's source as a non-empty string")
    extra_raw = raw.get("inputs", {})
    if not isinstance(extra_raw, dict):
        fail("inputs", f"expected an object like {{\"y\": {{\"kind\": ...}}}}, got {extra_raw!r}")
    extra = []
    reserved = RESERVED_NAMES - set(EXTRA_INPUTS)
    for name in sorted(extra_raw):
        identifier(f"inputs.{name}", name, reserved)
        extra.append((name, input_object(f"inputs.{name}", extra_raw[name])))
    shapes_raw = raw.get("param_shapes", {})
    if not isinstance(shapes_raw, dict):
        fail("param_shapes", f"expected an object like {{\"w\": [64]}}, got {shapes_raw!r}")
    for name, dims in shapes_raw.items():
        if name not in PROGRAM_PARAMS:
            identifier(f"param_shapes.{name}", name, RESERVED_NAMES)
            if name in extra_raw:
                fail(f"param_shapes.{name}", "a parameter cannot share its name with an extra input")
        dims_list(f"param_shapes.{name}", dims)
    case = _program_case(dtype, weight_dtype, shape, extra, eps, {k: tuple(v) for k, v in shapes_raw.items()})
    try:
        program = parse(source, case=case)
    except ProgramError as exc:
        raise SpecError(f"spec key 'program': {exc}") from None
    params = raw.get("params")
    if isinstance(params, dict) and params.get("kind") == "fill" and isinstance(params.get("values"), dict):
        unread = sorted(set(params["values"]) - set(program.params))
        if unread:
            fail(f"params.values.{unread[0]}", "the program does not read this parameter")
    unread = sorted(set(shapes_raw) - set(program.reads))
    if unread:
        fail(f"param_shapes.{unread[0]}", "the program does not read this parameter")
    unread = [n for n, _ in extra if n not in program.reads]
    if unread:
        fail(f"inputs.{unread[0]}", "the program does not read this input")
    pshapes = tuple((n, tuple(case.param_shapes[n])) for n in param_order(program.params))
    return program, tuple(extra), pshapes


def program_params(raw) -> dict:
    """A program's `params`: `ones`, `normal`, or `fill` with {name: value} (the others as `ones` gives them),
    which holds the constant values a module's constructor gives (Gemma's zero weight) in a lifted program."""
    if isinstance(raw, dict) and raw.get("kind") == "fill":
        for key in raw:
            if key not in ("kind", "values"):
                fail(f"params.{key}", "unknown parameter for kind 'fill' (known: values)")
        values = raw.get("values", {})
        if not isinstance(values, dict):
            fail("params.values", f"expected an object like {{\"weight\": 0.0}}, got {values!r}")
        items = tuple(sorted((identifier(f"params.values.{k}", k), number(f"params.values.{k}", v))
                             for k, v in values.items()))
        return {"kind": "fill", "values": items}
    return kinded("params", raw, PARAM_KINDS)
