"""One tree walk over the IR, shared by the static check, the torch module and the FP64 interpreter.

The walk itself (statements, names, Python-number arithmetic, resolving
dtypes and shapes) is the same everywhere; only what a tensor *is* differs
(a type, a torch.Tensor, a value with an error bound). Subclasses implement
the tensor hooks. Python-number arithmetic is done here, once, so every
backend sees bit-identical scalars (eps * 2, 1.0 / x.shape[-1], …).
"""
from __future__ import annotations

import math

from harness.program.ir import (
    Assign,
    BinOp,
    Call,
    Cast,
    Cat,
    DType,
    DTypeOf,
    IndexSlice,
    Linear,
    Name,
    Neg,
    Norm,
    Number,
    Outputs,
    Program,
    ProgramError,
    Reduce,
    Return,
    ShapeOf,
    ShapeOp,
    Unary,
)

INT_LIMIT = 2 ** 63


def symbolic(value) -> bool:
    """A symbolic size (torch's SymInt, or arithmetic on one) as a torch module traced with symbolic dims sees
    `x.shape[K]`: a number kept symbolic, so a symbolic case's compile does not specialise it (docs/shapes.md)."""
    return type(value).__name__ in ("SymInt", "SymFloat")


def _int_like(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or type(value).__name__ == "SymInt"


def is_scalar(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) or symbolic(value)


def scalar_binop(op: str, a, b, line: int):
    """Python-number arithmetic with the failure modes turned into ProgramErrors."""
    try:
        if op == "add":
            out = a + b
        elif op == "sub":
            out = a - b
        elif op == "mul":
            out = a * b
        elif op == "div":
            out = a / b
        elif op == "floordiv":
            if not (_int_like(a) and _int_like(b)):
                raise ProgramError(f"program line {line}: '//' is allowed between ints only")
            out = a // b
        else:
            small = isinstance(a, int) and isinstance(b, int) and 0 <= b <= 64 and abs(a) <= 2 ** 32
            out = a ** b if small else float(a) ** float(b)
    except ZeroDivisionError:
        raise ProgramError(f"program line {line}: division by zero") from None
    except OverflowError:
        raise ProgramError(f"program line {line}: number too large") from None
    if isinstance(out, complex):
        raise ProgramError(f"program line {line}: a power of a negative number is complex")
    if isinstance(out, int) and abs(out) >= INT_LIMIT:
        raise ProgramError(f"program line {line}: integer too large")
    if isinstance(out, float) and not math.isfinite(out):
        raise ProgramError(f"program line {line}: number too large")
    return out


class Walker:
    """Evaluates a Program over an environment; subclasses define tensor operations."""

    def __init__(self, env: dict):
        self.env = dict(env)
        self.line = 0
        self.target = ""

    def fail(self, what: str):
        raise ProgramError(f"program line {self.line}: {what}")

    def run(self, program: Program):
        for stmt in program.statements:
            self.line = stmt.line
            self.target = stmt.name if isinstance(stmt, Assign) else "return"
            value = self.eval(stmt.value)
            self.statement_done(stmt, value)
            if isinstance(stmt, Return):
                return value
            self.env[stmt.name] = value
        raise ProgramError("program: no return")  # pragma: no cover (parse guarantees one)

    def statement_done(self, stmt, value):
        """Hook: called with each statement's value."""

    # ------------------------------------------------------------------ walk
    def eval(self, node):
        if isinstance(node, Name):
            return self.env[node.id]
        if isinstance(node, Outputs):  # `return a, b`: a tuple of values, one per output
            return tuple(self.eval(v) for v in node.values)
        if isinstance(node, Number):
            return node.value
        if isinstance(node, ShapeOf):
            return self.shape_of(node)
        if isinstance(node, BinOp):
            left, right = self.eval(node.left), self.eval(node.right)
            if is_scalar(left) and is_scalar(right):
                return scalar_binop(node.op, left, right, self.line)
            if node.op == "floordiv":
                self.fail("'//' is allowed between ints only (sizes), not on tensors")
            return self.binop(node.op, left, right)
        if isinstance(node, Neg):
            value = self.eval(node.operand)
            return -value if is_scalar(value) else self.neg(value)
        if isinstance(node, Cast):
            value = self.eval(node.operand)
            like = self.eval(node.like) if node.like is not None else None
            return self.cast(node, value, self.target_dtype(node, like), like)
        if isinstance(node, Unary):
            return self.unary(node.op, self.eval(node.operand))
        if isinstance(node, Reduce):
            return self.reduce(node, self.eval(node.operand))
        if isinstance(node, ShapeOp):
            value = self.eval(node.operand)
            if is_scalar(value):
                self.fail(f"{node.op} needs a tensor, got a number")
            args = (tuple(self.index_item(a) for a in node.args) if node.op == "index"
                    else tuple(self.int_value(a, node.op) for a in node.args))
            return self.shape_op(node.op, value, args)
        if isinstance(node, Call):
            values = [self.eval(t) for t in node.operands]
            if any(is_scalar(v) for v in values):
                self.fail(f"{node.op} needs tensors, got a number")
            return self.call(node.op, values, dict(node.options))
        if isinstance(node, Cat):
            values = [self.eval(t) for t in node.tensors]
            if any(is_scalar(v) for v in values):
                self.fail("cat needs tensors, got a number")
            return self.cat(values, node.dim)
        if isinstance(node, Linear):
            return self.linear(self.eval(node.operand), self.eval(node.weight),
                               None if node.bias is None else self.eval(node.bias))
        if isinstance(node, Norm):
            return self.norm(node, self.eval(node.operand),
                             None if node.normalized_shape is None else tuple(self.eval(n) for n in node.normalized_shape),
                             None if node.groups is None else self.eval(node.groups),
                             None if node.weight is None else self.eval(node.weight),
                             None if node.bias is None else self.eval(node.bias),
                             None if node.eps is None else self.eval(node.eps))
        raise ProgramError(f"program line {self.line}: unknown node {type(node).__name__}")  # pragma: no cover

    def int_value(self, node, what: str) -> int:
        """An int argument (of a shape op): a number, NAME.shape[K], or arithmetic on them."""
        value = self.eval(node)
        if not _int_like(value):
            self.fail(f"{what}: arguments must be ints, got {value!r}")
        return value

    def index_item(self, item):
        """An index item as the shape rules read it: ":", "None", "..." or ("slice", lower, upper)."""
        if isinstance(item, IndexSlice):
            return ("slice",) + tuple(None if b is None else self.int_value(b, "a slice bound")
                                      for b in (item.lower, item.upper))
        return item

    def shape_of(self, node: ShapeOf) -> int:
        value = self.env[node.name]
        if is_scalar(value):
            self.fail(f"{node.name}.shape: {node.name!r} is a number, not a tensor")
        shape = tuple(self.shape(value))
        if not -len(shape) <= node.index < len(shape):
            self.fail(f"{node.name}.shape[{node.index}] is out of range for rank {len(shape)}")
        size = shape[node.index]
        return size if symbolic(size) else int(size)

    def target_dtype(self, node: Cast, like) -> str:
        """The dtype name a cast converts to."""
        if node.spelling == "type_as":
            if is_scalar(like):
                self.fail("type_as needs a tensor argument, got a number")
            return self.dtype(like)
        if isinstance(node.to, DType):
            return node.to.name
        if isinstance(node.to, DTypeOf):
            value = self.env[node.to.name]
            if is_scalar(value):
                self.fail(f"{node.to.name}.dtype: {node.to.name!r} is a number, not a tensor")
            return self.dtype(value)
        raise ProgramError(f"program line {self.line}: cast without a dtype")  # pragma: no cover

    # --------------------------------------------------------- tensor hooks
    def shape(self, tensor) -> tuple[int, ...]:
        raise NotImplementedError

    def dtype(self, tensor) -> str:
        raise NotImplementedError

    def binop(self, op, left, right):
        raise NotImplementedError

    def neg(self, value):
        raise NotImplementedError

    def cast(self, node: Cast, value, dtype: str, like):
        raise NotImplementedError

    def unary(self, op, value):
        raise NotImplementedError

    def reduce(self, node: Reduce, value):
        raise NotImplementedError

    def norm(self, node: Norm, value, normalized_shape, groups, weight, bias, eps):
        raise NotImplementedError

    def shape_op(self, op: str, value, args: tuple):
        raise NotImplementedError

    def cat(self, values: list, dim: int):
        raise NotImplementedError

    def linear(self, value, weight, bias):
        raise NotImplementedError

    def call(self, op: str, values: list, options: dict):
        """An op of the table's "call" rows (harness.program.calls) on tensor operands, options resolved."""
        raise NotImplementedError
