"""The lifter's handlers: each ATen op of an exported graph written in the program language's spellings.

A handler reads a node's arguments (earlier nodes' values, Python numbers,
lists, dtypes) and appends the statement that computes the node, an IR node
of harness.program.ir (never text: harness.program.render writes it for
display), or records that the node is another value already there (a clone,
a contiguous copy).
Shapes come from the node's metadata (torch.export's static shapes), so a
view or a slice is written with the sizes it had. The op table
(harness/program/ops.py) says which ATen ops compute each op of the language.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from harness.core.dtypes import name_of
from harness.core.eps import TORCH_NORM_EPS
from harness.modules.load import Unliftable
from harness.program import ops
from harness.program.ir import (
    Assign, BinOp, Cast, DType, Linear, Name, Neg, Norm, Number, Reduce, ShapeOp, Unary,
)

SKIP = frozenset({"_assert_tensor_metadata", "_assert_scalar", "_assert_async", "sym_constrain_range",
                  "sym_constrain_range_for_size", "_assert_tensor_metadata_default"})
_FLOATS = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Val:
    """A tensor of the program: the name that holds it and torch.export's fake value."""
    name: str
    meta: Any

    @property
    def expr(self) -> Name:
        return Name(self.name)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(n) for n in self.meta.shape)

    @property
    def dtype(self) -> str:
        return name_of(self.meta.dtype)


def _num(v) -> Number:
    """A Python number of the graph (an int, a float, a SymInt made concrete) as the IR's Number."""
    import math

    if isinstance(v, bool):
        raise TypeError("a bool")
    value = float(v) if isinstance(v, float) else int(v)
    if not math.isfinite(value):
        raise TypeError(f"{value!r} has no literal")
    return Number(value)


class Lifter:
    """Walks the graph's nodes, keeping each one's value and the program's statements (IR)."""

    def __init__(self, owner: str, ep):
        self.owner = owner
        self.ep = ep
        self.env: dict[str, Any] = {}
        self.statements: list[Assign] = []
        self.assigned: dict[str, Any] = {}  # program name -> the expression assigned to it
        self.params: list[tuple[str, str]] = []
        self.ops: list[str] = []
        self.taken: set[str] = set()
        self.kinds: list[str] = []

    @staticmethod
    def op_name(node) -> str:
        if node.target is operator.getitem:
            return "getitem"
        return str(node.target)

    def fail(self, node, what: str):
        raise Unliftable(f"class {self.owner}: {self.op_name(node)} {what}")

    def value(self, arg):
        """The program value of an argument: a Val, a number, a list of values, a dtype name, None."""
        import torch

        if isinstance(arg, torch.fx.Node):
            return self.env[arg.name]
        if isinstance(arg, (list, tuple)):
            return [self.value(a) for a in arg]
        if isinstance(arg, torch.dtype):
            return name_of(arg)
        return arg

    def expr(self, arg):
        """The IR of an argument: a tensor's Name, a Number, or None."""
        v = self.value(arg)
        if isinstance(v, Val):
            return v.expr
        if v is None:
            return None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            try:
                return _num(v)
            except TypeError:
                pass
        raise Unliftable(f"class {self.owner}: an argument {v!r} is outside the program language")

    def assign(self, name: str, expr) -> None:
        """One statement: `name = expr`."""
        self.statements.append(Assign(name, expr, len(self.statements) + 1))
        self.assigned[name] = expr

    def emit(self, node, expr) -> Val:
        name = _fresh(node.name, self.taken)
        self.assign(name, expr)
        val = Val(name, node.meta["val"])
        self.env[node.name] = val
        return val

    def alias(self, node, arg) -> None:
        self.env[node.name] = self.value(arg)

    def tensor(self, node, arg) -> Val:
        v = self.value(arg)
        if not isinstance(v, Val):
            self.fail(node, "takes a number where the language needs a tensor")
        return v

    def is_statistic(self, arg) -> bool:
        """Whether the value is a mean or a sum the program computed (a Reduce): what a centred or shifted
        value subtracts or adds."""
        v = self.value(arg)
        expr = self.assigned.get(v.name) if isinstance(v, Val) else None
        return isinstance(expr, Reduce) and expr.op in ("mean", "sum")

    def pattern(self) -> str:
        """The family the program shows: its F.* norm, else by its statistics, else "program"."""
        for kind in ("layer_norm", "rms_norm", "group_norm", "batch_norm"):
            if kind in self.kinds:
                return kind
        if "var" in self.kinds or "centered" in self.kinds:
            return "layer_norm"
        if "mean" in self.kinds or "sum" in self.kinds:
            return "rms_norm"
        return "program"


def _fresh(base: str, taken: set[str]) -> str:
    from harness.modules.names import program_name

    base = candidate = program_name(base)
    k = 2
    while candidate in taken:
        candidate, k = f"{base}_{k}", k + 1
    taken.add(candidate)
    return candidate


def _arg(node, i, name, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


# -- elementwise ----------------------------------------------------------------------------------------
def _unary(op):
    def handle(lf: Lifter, node):
        lf.emit(node, Unary(op, lf.tensor(node, node.args[0]).expr))
    return handle


def _binary(op):
    def handle(lf: Lifter, node):
        a, b = node.args[0], node.args[1]
        alpha = node.kwargs.get("alpha", 1)
        if node.kwargs.get("rounding_mode") is not None:
            lf.fail(node, "rounds its quotient (rounding_mode), which the language cannot write")

        def scaled(arg):
            return lf.expr(arg) if alpha == 1 else BinOp("mul", lf.expr(arg), _num(alpha))
        if "rsub" in str(node.target):  # rsub(a, b) = b - alpha * a
            lf.emit(node, BinOp("sub", lf.expr(b), scaled(a)))
            return
        if op in ("sub", "add") and lf.is_statistic(b):
            lf.kinds.append("centered" if op == "sub" else op)
        lf.emit(node, BinOp(op, lf.expr(a), scaled(b)))
    return handle


def _neg(lf, node):
    lf.emit(node, Neg(lf.tensor(node, node.args[0]).expr))


def _pow(lf, node):
    target = str(node.target)
    if target.endswith(".Scalar"):  # pow.Scalar(k, t) = k ** t
        lf.emit(node, BinOp("pow", lf.expr(node.args[0]), lf.tensor(node, node.args[1]).expr))
    else:
        lf.emit(node, BinOp("pow", lf.tensor(node, node.args[0]).expr, lf.expr(node.args[1])))


# -- casts ----------------------------------------------------------------------------------------------
def _cast(lf: Lifter, node):
    import torch

    src = lf.tensor(node, node.args[0])
    out = name_of(node.meta["val"].dtype)
    if "type_as" in str(node.target):
        other = lf.tensor(node, node.args[1])
        if other.dtype != src.dtype:
            lf.emit(node, Cast(src.expr, "type_as", like=other.expr))
        else:
            lf.alias(node, node.args[0])
        return
    if out not in _FLOATS:
        lf.fail(node, f"casts to {out} (the language holds float32, float16 and bfloat16)")
    contiguous = node.kwargs.get("memory_format") == torch.contiguous_format
    if out == src.dtype:
        lf.alias(node, node.args[0])
        return
    lf.emit(node, Cast(src.expr, "to", DType(out), contiguous=contiguous))


def to(expr, dtype: str) -> Cast:
    """expr.to(torch.<dtype>)."""
    return Cast(expr, "to", DType(dtype))


# -- reductions -----------------------------------------------------------------------------------------
def _dims(dims) -> tuple[int, ...] | None:
    return tuple(int(d) for d in dims) if dims else None


def _reduce(op):
    def handle(lf: Lifter, node):
        a = lf.tensor(node, node.args[0])
        src = a.expr
        dtype = node.kwargs.get("dtype")
        if dtype is not None and name_of(dtype) != a.dtype:
            if name_of(dtype) not in _FLOATS:
                lf.fail(node, f"accumulates in {name_of(dtype)}")
            src = to(src, name_of(dtype))
        dims = _arg(node, 1, "dim")
        keep = bool(_arg(node, 2, "keepdim", False))
        lf.kinds.append(op)
        lf.emit(node, Reduce(op, src, _dims(dims), keep))
    return handle


def _var(lf: Lifter, node) -> Reduce:
    a = lf.tensor(node, node.args[0])
    target = str(node.target)
    dims = _arg(node, 1, "dim")
    if target.endswith(".dim"):  # var.dim(x, dim, unbiased=True, keepdim=False)
        correction = 1 if _arg(node, 2, "unbiased", True) else 0
        keep = bool(_arg(node, 3, "keepdim", False))
    else:  # var.correction(x, dim=None, *, correction=None, keepdim=False)
        correction = node.kwargs.get("correction", 1)
        correction = 1 if correction is None else correction
        keep = bool(node.kwargs.get("keepdim", False))
    lf.kinds.append("var")
    return Reduce("var", a.expr, _dims(dims), keep, _num(correction).value)


def _var_node(lf, node):
    lf.emit(node, _var(lf, node))


def _std(lf, node):
    lf.emit(node, Unary("sqrt", _var(lf, node)))


def _vector_norm(lf: Lifter, node):
    """linalg_vector_norm(x, 2, dim, keepdim) (`x.norm(p=2, dim=…)`, an L2 norm of QK-norms) as ATen's CPU
    kernel computes it: the squares summed in float32 (opmath, for every float dtype), the square root in
    float32, rounded once to x's dtype (or the `dtype=` it asks for)."""
    x = lf.tensor(node, node.args[0])
    p = _arg(node, 1, "ord", 2)
    if p != 2:
        lf.fail(node, f"takes the {p}-norm; the language writes the 2-norm, as sqrt of a sum of squares")
    dims = _arg(node, 2, "dim")
    keep = bool(_arg(node, 3, "keepdim", False))
    out = node.kwargs.get("dtype")
    out = x.dtype if out is None else name_of(out)
    if out not in _FLOATS:
        lf.fail(node, f"gives its norm in {out}")
    src = x.expr if x.dtype == "float32" else to(x.expr, "float32")
    expr = Unary("sqrt", Reduce("sum", Unary("square", src), _dims(dims), keep))
    lf.kinds.append("sum")
    lf.emit(node, expr if out == "float32" else to(expr, out))


def _var_mean(lf: Lifter, node):
    var = _var(lf, node)
    name_v, name_m = _fresh(node.name + "_var", lf.taken), _fresh(node.name + "_mean", lf.taken)
    lf.assign(name_v, var)
    keep = bool(node.kwargs.get("keepdim", False))
    lf.assign(name_m, Reduce("mean", var.operand, var.dims, keep))
    meta = node.meta["val"]
    lf.env[node.name] = (Val(name_v, meta[0]), Val(name_m, meta[1]))


# -- norms and linear -----------------------------------------------------------------------------------
def _norm(kind, tuple_out=False):
    def handle(lf: Lifter, node):
        x = lf.tensor(node, node.args[0])
        if kind == "group_norm" and "native" in str(node.target):  # native_group_norm(x, w, b, N, C, HxW, G, eps)
            w, b, groups, eps = node.args[1], node.args[2], node.args[6], node.args[7]
            expr = Norm(kind, x.expr, None, _num(groups), lf.expr(w), lf.expr(b), _num(eps))
        elif kind == "group_norm":
            groups, w, b = node.args[1], _arg(node, 2, "weight"), _arg(node, 3, "bias")
            eps = _arg(node, 4, "eps", TORCH_NORM_EPS)
            expr = Norm(kind, x.expr, None, _num(groups), lf.expr(w), lf.expr(b), _num(eps))
        elif kind == "layer_norm":
            shape, w, b = node.args[1], _arg(node, 2, "weight"), _arg(node, 3, "bias")
            eps = _arg(node, 4, "eps", TORCH_NORM_EPS)
            expr = Norm(kind, x.expr, tuple(_num(n) for n in shape), None, lf.expr(w), lf.expr(b), _num(eps))
        else:
            shape, w, eps = node.args[1], _arg(node, 2, "weight"), _arg(node, 3, "eps")
            expr = Norm(kind, x.expr, tuple(_num(n) for n in shape), None, lf.expr(w), None,
                        None if eps is None else _num(eps))
        lf.kinds.append(kind)
        if not tuple_out:
            lf.emit(node, expr)
            return
        name = _fresh(node.name, lf.taken)
        lf.assign(name, expr)
        lf.env[node.name] = (Val(name, node.meta["val"][0]),) + tuple(_Unread(kind, i)
                                                                     for i in range(1, len(node.meta["val"])))
    return handle


@dataclass(frozen=True)
class _Unread:
    """A norm kernel's statistic (its mean or rstd), which the language does not give out."""
    kind: str
    index: int


def _batch_norm(lf: Lifter, node):
    """Eval batch_norm (training=False) as the kernel computes it: float32 arithmetic, one rounding back."""
    target = str(node.target)
    x = lf.tensor(node, node.args[0])
    if "_native_batch_norm_legit_no_training" in target:
        w, b, rm, rv, eps = node.args[1], node.args[2], node.args[3], node.args[4], node.args[6]
    else:
        w, b, rm, rv, training, eps = (node.args[1], node.args[2], node.args[3], node.args[4], node.args[5],
                                       node.args[7])
        if training:
            lf.fail(node, "normalizes with the batch's statistics (training mode)")
    index = (":",) + ("None",) * (len(x.shape) - 2)  # a channel's value over the dims after it

    def up(arg, channel=True):
        v = lf.tensor(node, arg)
        e = v.expr if v.dtype == "float32" else to(v.expr, "float32")
        return ShapeOp("index", e, index) if channel else e

    expr = BinOp("mul", BinOp("sub", up(node.args[0], False), up(rm)),
                 Unary("rsqrt", BinOp("add", up(rv), _num(eps))))
    if lf.value(w) is not None:
        expr = BinOp("mul", expr, up(w))
    if lf.value(b) is not None:
        expr = BinOp("add", expr, up(b))
    if x.dtype != "float32":
        expr = to(expr, x.dtype)
    lf.kinds.append("batch_norm")
    if "_native" in target:
        name = _fresh(node.name, lf.taken)
        lf.assign(name, expr)
        lf.env[node.name] = (Val(name, node.meta["val"][0]),) + tuple(_Unread("batch_norm", i) for i in (1, 2))
    else:
        lf.emit(node, expr)


def _linear(lf: Lifter, node):
    x, w = lf.tensor(node, node.args[0]), lf.tensor(node, node.args[1])
    b = _arg(node, 2, "bias")
    lf.kinds.append("linear")
    lf.emit(node, Linear(x.expr, w.expr, lf.expr(b) if b is not None else None))
