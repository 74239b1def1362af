"""IR -> program text: the one renderer of the language, for display and for a spec that prints a program.

A program built as IR (the lifter's) is shown as text and handed on as a
spec's `program` key; the text must parse back to the very IR it came from,
so each node has one spelling (the method form where there is one, F.* for
the functionals, torch.* for the other functions) and parentheses go exactly
where Python's precedence needs them. `parse(render_program(p)) == p` for a program
whose source is its rendering (tests/program/test_render.py checks it over
the styles, the fuzzer's programs and the lifter's).
"""
from __future__ import annotations

import dataclasses
import math

from harness.program import ops
from harness.program.grammar import MAX_SOURCE
from harness.program.ir import (
    Assign, BinOp, Call, Cast, Cat, DType, DTypeOf, IndexSlice, Linear, Name, Neg, Norm, Number, Program, ProgramError,
    Reduce, Return, ShapeOf, ShapeOp, Unary, param_order,
)

_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "floordiv": "//"}
# pow: 4; a unary minus: 3; an atom or postfix: 5 (`@` binds as `*`)
_LEVEL = {"add": 1, "sub": 1, "mul": 2, "div": 2, "floordiv": 2, "matmul": 2}
_SPELLING = {"float": ".float()", "half": ".half()", "bfloat16": ".bfloat16()"}


def program_from_ir(statements, inputs=("x",), params=()) -> Program:
    """The Program of statements built as IR (the lifter's): its source is their rendering, its reads what
    `parse` of that source against `inputs` and `params` finds, so parse(program.source) gives it back."""
    inputs = ("x",) + tuple(sorted(n for n in inputs if n != "x"))
    params = param_order(params)
    statements = tuple(dataclasses.replace(s, line=i) for i, s in enumerate(statements, 1))
    read: set[str] = set()
    for s in statements:
        read |= names_read(s.value)
    reads = tuple(n for n in inputs + params + ("eps",) if n in read)
    source = render_program(statements)
    if len(source) > MAX_SOURCE:  # the language's limit holds for a program built as IR too
        raise ProgramError(f"program: longer than {MAX_SOURCE} characters")
    return Program(source, statements, reads, inputs, params)


def names_read(e) -> set[str]:
    """Every name an expression reads (a Name, NAME.shape[K], NAME.dtype)."""
    if isinstance(e, Name):
        return {e.id}
    if isinstance(e, (ShapeOf, DTypeOf)):
        return {e.name}
    out: set[str] = set()
    if dataclasses.is_dataclass(e):
        for f in dataclasses.fields(e):
            value = getattr(e, f.name)
            for item in value if isinstance(value, tuple) else (value,):
                if dataclasses.is_dataclass(item):
                    out |= names_read(item)
    return out


def render_program(statements) -> str:
    """The text of a program's statements (Assign and Return), one a line."""
    return "\n".join(render_statement(s) for s in statements)


def render_statement(statement) -> str:
    if isinstance(statement, Assign):
        return f"{statement.name} = {render_expr(statement.value)}"
    if isinstance(statement, Return):
        return f"return {', '.join(render_expr(v) for v in statement.values)}"
    raise TypeError(f"not a statement: {statement!r}")


def number_literal(value) -> str:
    """A number literal as Python writes it back (1e-05, 64, -1.0); non-finite numbers have no literal."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{value!r} has no literal in the program language")
    return repr(value)


def _level(e) -> int:
    if isinstance(e, BinOp):
        return 4 if e.op == "pow" else _LEVEL[e.op]
    if isinstance(e, Call) and "operator" in ops.get(e.op).extra:
        return _LEVEL[e.op]
    if isinstance(e, Neg) or (isinstance(e, Number) and e.value < 0):
        return 3
    return 5


def _at(e, level: int) -> str:
    """`e` rendered where an operand of precedence `level` is needed: parenthesised when it binds less."""
    text = render_expr(e)
    return f"({text})" if _level(e) < level else text


def _postfix(e) -> str:
    """`e` as the receiver of a method call or a subscript."""
    return _at(e, 5)


def _binop(e: BinOp) -> str:
    symbol = _SYMBOL[e.op]
    if e.op == "pow":  # right-associative, and binds tighter than a unary minus on its left
        return f"{_at(e.left, 5)} ** {_at(e.right, 3)}"
    level = _LEVEL[e.op]
    return f"{_at(e.left, level)} {symbol} {_at(e.right, level + 1)}"


def _option(value) -> str:
    """An option's constant as Python writes it."""
    if isinstance(value, tuple):
        return "(" + ", ".join(_option(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, (bool, str)) or value is None:
        return repr(value)
    return number_literal(value)


def _call(e: Call) -> str:
    """A call op: `a @ b` for an operator's, else its function with the options that differ from the default
    (a required one always), by keyword."""
    op = ops.get(e.op)
    if "operator" in op.extra:
        level = _LEVEL[e.op]
        return f"{_at(e.operands[0], level)} {op.extra['operator']} {_at(e.operands[1], level + 1)}"
    args = [render_expr(t) for t in e.operands]
    for option in op.options:
        value = e.option(option.name)
        if option.required or value != option.default or type(value) is not type(option.default):
            args.append(f"{option.name}={_option(value)}")
    return f"{_function(e.op)}({', '.join(args)})"


def _item(item) -> str:
    if isinstance(item, IndexSlice):
        return ":".join("" if b is None else render_expr(b) for b in (item.lower, item.upper))
    return item


def _dims(dims) -> str:
    return number_literal(dims[0]) if len(dims) == 1 else "[" + ", ".join(number_literal(d) for d in dims) + "]"


def _optional(e) -> str:
    return "None" if e is None else render_expr(e)


def _function(op: str) -> str:
    """F.op for an op spelled as a torch.nn.functional call, else torch.op."""
    return f"F.{op}" if any(f.startswith("nn.functional.") for f in ops.get(op).functions) else f"torch.{op}"


def _norm(e: Norm) -> str:
    args = [render_expr(e.operand)]
    if e.kind == "group_norm":
        args.append(render_expr(e.groups))
    else:
        items = [render_expr(n) for n in e.normalized_shape]
        args.append("(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")")
    args.append(_optional(e.weight))
    if e.kind != "rms_norm":
        args.append(_optional(e.bias))
        if e.eps is not None:  # F.layer_norm / F.group_norm take no None for eps: left out, torch's default
            args.append(render_expr(e.eps))
    else:
        args.append(_optional(e.eps))
    return f"F.{e.kind}({', '.join(args)})"


def render_expr(e) -> str:
    """The text of one expression."""
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Number):
        return number_literal(e.value)
    if isinstance(e, ShapeOf):
        return f"{e.name}.shape[{e.index}]"
    if isinstance(e, BinOp):
        return _binop(e)
    if isinstance(e, Neg):
        return f"-{_at(e.operand, 3)}"
    if isinstance(e, Cast):
        if e.spelling == "type_as":
            return f"{_postfix(e.operand)}.type_as({render_expr(e.like)})"
        if e.spelling in _SPELLING:
            return _postfix(e.operand) + _SPELLING[e.spelling]
        to = f"torch.{e.to.name}" if isinstance(e.to, DType) else f"{e.to.name}.dtype"
        fmt = ", memory_format=torch.contiguous_format" if e.contiguous else ""
        return f"{_postfix(e.operand)}.to({to}{fmt})"
    if isinstance(e, Unary):
        return f"{_function(e.op)}({render_expr(e.operand)})"
    if isinstance(e, Reduce):
        args = [_dims(e.dims)] if e.dims else []
        if e.keepdim:
            args.append("keepdim=True")
        if e.correction is not None:
            args.append(f"correction={number_literal(e.correction)}")
        return f"{_postfix(e.operand)}.{e.op}({', '.join(args)})"
    if isinstance(e, ShapeOp):
        if e.op == "index":
            return f"{_postfix(e.operand)}[{', '.join(_item(i) for i in e.args)}]"
        return f"{_postfix(e.operand)}.{e.op}({', '.join(render_expr(a) for a in e.args)})"
    if isinstance(e, Cat):
        return f"torch.cat([{', '.join(render_expr(t) for t in e.tensors)}], {number_literal(e.dim)})"
    if isinstance(e, Linear):
        bias = f", {render_expr(e.bias)}" if e.bias is not None else ""
        return f"F.linear({render_expr(e.operand)}, {render_expr(e.weight)}{bias})"
    if isinstance(e, Norm):
        return _norm(e)
    if isinstance(e, Call):
        return _call(e)
    if isinstance(e, (DType, DTypeOf)):
        raise TypeError(f"a dtype is written only inside a cast: {e!r}")
    raise TypeError(f"not an expression of the program language: {e!r}")
