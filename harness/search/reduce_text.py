"""Program IR -> program text, for the reducer's candidates (DESIGN §7).

The reducer edits programs as IR (harness/program/ir.py) and hands each
candidate on as a spec's `program` key, which the spec parses and checks
again: nothing here is executed, and a text that does not parse back is a
candidate the spec refuses. Each node has one spelling (the method form
where the op has one, F.* for the functionals, torch.* for the rest);
operands are parenthesised wherever Python's precedence could regroup them.
The program layer is getting its own renderer (harness/program/render.py);
once it is on main, this module gives way to it.
"""
from __future__ import annotations

from harness.program import ops
from harness.program.ir import (
    Assign, BinOp, Cast, Cat, DType, DTypeOf, Linear, Name, Neg, Norm, Number, Reduce, ShapeOf, ShapeOp, Unary,
)

_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}
_LEVEL = {"add": 1, "sub": 1, "mul": 2, "div": 2, "pow": 4}  # a unary minus: 3; an atom or a call: 5
_OPS = {o.name: o for o in ops.TABLE}


def render_program(statements) -> str:
    """The source of a program's statements (Assign ... Return), one per line."""
    return "\n".join(render_statement(s) for s in statements)


def render_statement(statement) -> str:
    if isinstance(statement, Assign):
        return f"{statement.name} = {render_expr(statement.value)}"
    return f"return {render_expr(statement.value)}"


def number_literal(value) -> str:
    return repr(value)


def _level(e) -> int:
    if isinstance(e, BinOp):
        return _LEVEL[e.op]
    if isinstance(e, Neg) or (isinstance(e, Number) and e.value < 0):
        return 3
    return 5


def _at(e, level: int) -> str:
    """`e` as an operand that needs at least `level` to stand without parentheses."""
    text = render_expr(e)
    return text if _level(e) >= level else f"({text})"


def _binop(e: BinOp) -> str:
    level = _LEVEL[e.op]
    if e.op == "pow":  # right-associative, and binds tighter than a unary minus on its left
        return f"{_at(e.left, 5)} ** {_at(e.right, 5)}"
    return f"{_at(e.left, level)} {_SYMBOL[e.op]} {_at(e.right, level + 1)}"


def _dims(dims) -> str:
    return str(dims[0]) if len(dims) == 1 else "[" + ", ".join(map(str, dims)) + "]"


def _unary(e: Unary) -> str:
    op = _OPS[e.op]
    if op.method:
        return f"{_at(e.operand, 5)}.{e.op}()"
    functional = [f for f in op.functions if f.startswith("nn.functional.")]
    if functional:
        return f"F.{functional[0].removeprefix('nn.functional.')}({render_expr(e.operand)})"
    return f"torch.{op.functions[0]}({render_expr(e.operand)})"


def _cast(e: Cast) -> str:
    base = _at(e.operand, 5)
    if e.spelling == "type_as":
        return f"{base}.type_as({render_expr(e.like)})"
    if e.spelling != "to":
        return f"{base}.{e.spelling}()"
    memory = ", memory_format=torch.contiguous_format" if e.contiguous else ""
    return f"{base}.to({render_expr(e.to)}{memory})"


def _reduce(e: Reduce) -> str:
    args = []
    if e.dims is not None:
        args.append(_dims(e.dims))
    elif e.keepdim:
        args.append("None")
    if e.keepdim:
        args.append("keepdim=True")
    if e.correction is not None:
        args.append(f"correction={number_literal(e.correction)}")
    return f"{_at(e.operand, 5)}.{e.op}({', '.join(args)})"


def _shape_op(e: ShapeOp) -> str:
    base = _at(e.operand, 5)
    if e.op == "index":
        return f"{base}[{', '.join(e.args)}]"
    return f"{base}.{e.op}({', '.join(render_expr(a) for a in e.args)})"


def _optional(e) -> str:
    return "None" if e is None else render_expr(e)


def _norm(e: Norm) -> str:
    args = [render_expr(e.operand)]
    if e.kind == "group_norm":
        args.append(render_expr(e.groups))
    else:
        items = [render_expr(n) for n in e.normalized_shape]
        args.append("(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")")
    tail = [e.weight] + ([] if e.kind == "rms_norm" else [e.bias])
    rendered = [_optional(t) for t in tail]
    if e.eps is not None:
        rendered.append(render_expr(e.eps))
    while rendered and rendered[-1] == "None":
        rendered.pop()  # a trailing None is the default
    return f"F.{e.kind}({', '.join(args + rendered)})"


def render_expr(e) -> str:
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Number):
        return number_literal(e.value)
    if isinstance(e, DType):
        return f"torch.{e.name}"
    if isinstance(e, DTypeOf):
        return f"{e.name}.dtype"
    if isinstance(e, ShapeOf):
        return f"{e.name}.shape[{e.index}]"
    if isinstance(e, BinOp):
        return _binop(e)
    if isinstance(e, Neg):
        return f"-{_at(e.operand, 3)}"
    if isinstance(e, Cast):
        return _cast(e)
    if isinstance(e, Unary):
        return _unary(e)
    if isinstance(e, Reduce):
        return _reduce(e)
    if isinstance(e, ShapeOp):
        return _shape_op(e)
    if isinstance(e, Cat):
        return f"torch.cat([{', '.join(render_expr(t) for t in e.tensors)}], dim={e.dim})"
    if isinstance(e, Linear):
        bias = "" if e.bias is None else f", {render_expr(e.bias)}"
        return f"F.linear({render_expr(e.operand)}, {render_expr(e.weight)}{bias})"
    if isinstance(e, Norm):
        return _norm(e)
    raise TypeError(f"cannot render {type(e).__name__}")  # pragma: no cover (every Expr is above)
