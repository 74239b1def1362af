"""The lifter's handlers: each ATen op of an exported graph written in the program language's spellings.

A handler reads a node's arguments (earlier nodes' values, Python numbers,
lists, dtypes) and appends the statement that computes the node, or records
that the node is another value already there (a clone, a contiguous copy).
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

SKIP = frozenset({"_assert_tensor_metadata", "_assert_scalar", "_assert_async", "sym_constrain_range",
                  "sym_constrain_range_for_size", "_assert_tensor_metadata_default"})
_FLOATS = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Val:
    """A tensor of the program: the expression (a name) that holds it and torch.export's fake value."""
    text: str
    meta: Any

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(n) for n in self.meta.shape)

    @property
    def dtype(self) -> str:
        return name_of(self.meta.dtype)


def _num(v) -> str:
    if isinstance(v, bool):
        raise TypeError("a bool")
    return repr(float(v)) if isinstance(v, float) else repr(int(v))


class Lifter:
    """Walks the graph's nodes, keeping each one's value and the program's lines."""

    def __init__(self, owner: str, ep):
        self.owner = owner
        self.ep = ep
        self.env: dict[str, Any] = {}
        self.lines: list[str] = []
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

    def text(self, arg) -> str:
        v = self.value(arg)
        if isinstance(v, Val):
            return v.text
        if v is None:
            return "None"
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return _num(v)
        raise Unliftable(f"class {self.owner}: an argument {v!r} is outside the program language")

    def emit(self, node, expr: str) -> Val:
        name = _fresh(node.name, self.taken)
        self.lines.append(f"{name} = {expr}")
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
    entry = ops.get(op)
    spell = f"F.{op}" if any(f.startswith("nn.functional.") for f in entry.functions) else f"torch.{op}"

    def handle(lf: Lifter, node):
        lf.emit(node, f"{spell}({lf.tensor(node, node.args[0]).text})")
    return handle


def _binary(op):
    symbol = ops.get(op).extra["operator"]

    def handle(lf: Lifter, node):
        a, b = node.args[0], node.args[1]
        alpha = node.kwargs.get("alpha", 1)
        if node.kwargs.get("rounding_mode") is not None:
            lf.fail(node, "rounds its quotient (rounding_mode), which the language cannot write")
        right = lf.text(b) if alpha == 1 else f"({lf.text(b)} * {_num(alpha)})"
        if "rsub" in str(node.target):  # rsub(a, b) = b - alpha * a
            left, right = lf.text(b), (lf.text(a) if alpha == 1 else f"({lf.text(a)} * {_num(alpha)})")
            lf.emit(node, f"{left} - {right}")
            return
        if op in ("sub", "add") and _is_stat(lf, b):
            lf.kinds.append("centered" if op == "sub" else op)
        lf.emit(node, f"{lf.text(a)} {symbol} {right}")
    return handle


def _is_stat(lf, arg) -> bool:
    v = lf.value(arg)
    return isinstance(v, Val) and v.text.startswith(("mean", "sum"))


def _neg(lf, node):
    lf.emit(node, f"-{lf.tensor(node, node.args[0]).text}")


def _pow(lf, node):
    target = str(node.target)
    if target.endswith(".Scalar"):  # pow.Scalar(k, t) = k ** t
        lf.emit(node, f"{lf.text(node.args[0])} ** {lf.tensor(node, node.args[1]).text}")
    else:
        lf.emit(node, f"{lf.tensor(node, node.args[0]).text} ** {lf.text(node.args[1])}")


# -- casts ----------------------------------------------------------------------------------------------
def _cast(lf: Lifter, node):
    import torch

    src = lf.tensor(node, node.args[0])
    out = name_of(node.meta["val"].dtype)
    if "type_as" in str(node.target):
        other = lf.tensor(node, node.args[1])
        lf.emit(node, f"{src.text}.type_as({other.text})") if other.dtype != src.dtype else lf.alias(node, node.args[0])
        return
    if out not in _FLOATS:
        lf.fail(node, f"casts to {out} (the language holds float32, float16 and bfloat16)")
    contiguous = node.kwargs.get("memory_format") == torch.contiguous_format
    if out == src.dtype:
        lf.alias(node, node.args[0])
        return
    fmt = ", memory_format=torch.contiguous_format" if contiguous else ""
    lf.emit(node, f"{src.text}.to(torch.{out}{fmt})")


# -- reductions -----------------------------------------------------------------------------------------
def _dims(dims) -> str:
    if dims is None:
        return ""
    dims = list(dims)
    return repr(dims[0]) if len(dims) == 1 else repr(dims)


def _reduce(op):
    def handle(lf: Lifter, node):
        a = lf.tensor(node, node.args[0])
        src = a.text
        dtype = node.kwargs.get("dtype")
        if dtype is not None and name_of(dtype) != a.dtype:
            if name_of(dtype) not in _FLOATS:
                lf.fail(node, f"accumulates in {name_of(dtype)}")
            src = f"{src}.to(torch.{name_of(dtype)})"
        dims = _arg(node, 1, "dim")
        keep = bool(_arg(node, 2, "keepdim", False))
        args = [_dims(dims)] if dims else []
        if keep:
            args.append("keepdim=True")
        lf.kinds.append(op)
        lf.emit(node, f"{src}.{op}({', '.join(args)})")
    return handle


def _var(lf: Lifter, node, emit=True):
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
    args = ([_dims(dims)] if dims else []) + (["keepdim=True"] if keep else []) + [f"correction={_num(correction)}"]
    lf.kinds.append("var")
    return f"{a.text}.var({', '.join(args)})"


def _var_node(lf, node):
    lf.emit(node, _var(lf, node))


def _std(lf, node):
    lf.emit(node, f"torch.sqrt({_var(lf, node)})")


def _var_mean(lf: Lifter, node):
    var_expr = _var(lf, node)
    dims = _arg(node, 1, "dim")
    keep = bool(node.kwargs.get("keepdim", False))
    mean_args = ([_dims(dims)] if dims else []) + (["keepdim=True"] if keep else [])
    name_v, name_m = _fresh(node.name + "_var", lf.taken), _fresh(node.name + "_mean", lf.taken)
    a = lf.tensor(node, node.args[0])
    lf.lines += [f"{name_v} = {var_expr}", f"{name_m} = {a.text}.mean({', '.join(mean_args)})"]
    meta = node.meta["val"]
    lf.env[node.name] = (Val(name_v, meta[0]), Val(name_m, meta[1]))


# -- norms and linear -----------------------------------------------------------------------------------
def _shape_text(shape) -> str:
    items = [_num(n) for n in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _norm(kind, tuple_out=False):
    def handle(lf: Lifter, node):
        x = lf.tensor(node, node.args[0])
        if kind == "group_norm" and "native" in str(node.target):  # native_group_norm(x, w, b, N, C, HxW, G, eps)
            w, b, groups, eps = node.args[1], node.args[2], node.args[6], node.args[7]
            text = f"F.group_norm({x.text}, {_num(groups)}, {lf.text(w)}, {lf.text(b)}, {_num(eps)})"
        elif kind == "group_norm":
            groups, w, b = node.args[1], _arg(node, 2, "weight"), _arg(node, 3, "bias")
            eps = _arg(node, 4, "eps", TORCH_NORM_EPS)
            text = f"F.group_norm({x.text}, {_num(groups)}, {lf.text(w)}, {lf.text(b)}, {_num(eps)})"
        elif kind == "layer_norm":
            shape, w, b = node.args[1], _arg(node, 2, "weight"), _arg(node, 3, "bias")
            eps = _arg(node, 4, "eps", TORCH_NORM_EPS)
            text = f"F.layer_norm({x.text}, {_shape_text(shape)}, {lf.text(w)}, {lf.text(b)}, {_num(eps)})"
        else:
            shape, w, eps = node.args[1], _arg(node, 2, "weight"), _arg(node, 3, "eps")
            text = f"F.rms_norm({x.text}, {_shape_text(shape)}, {lf.text(w)}, {'None' if eps is None else _num(eps)})"
        lf.kinds.append(kind)
        if not tuple_out:
            lf.emit(node, text)
            return
        name = _fresh(node.name, lf.taken)
        lf.lines.append(f"{name} = {text}")
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
    rank = len(x.shape)
    index = "[:" + ", None" * (rank - 2) + "]"

    def up(arg, at=index):
        v = lf.tensor(node, arg)
        return (v.text if v.dtype == "float32" else f"{v.text}.to(torch.float32)") + at

    expr = f"({up(node.args[0], '')} - {up(rm)}) * torch.rsqrt({up(rv)} + {_num(eps)})"
    if lf.value(w) is not None:
        expr = f"{expr} * {up(w)}"
    if lf.value(b) is not None:
        expr = f"{expr} + {up(b)}"
    if x.dtype != "float32":
        expr = f"({expr}).to(torch.{x.dtype})"
    lf.kinds.append("batch_norm")
    if "_native" in target:
        name = _fresh(node.name, lf.taken)
        lf.lines.append(f"{name} = {expr}")
        lf.env[node.name] = (Val(name, node.meta["val"][0]),) + tuple(_Unread("batch_norm", i) for i in (1, 2))
    else:
        lf.emit(node, expr)


def _linear(lf: Lifter, node):
    x, w = lf.tensor(node, node.args[0]), lf.tensor(node, node.args[1])
    b = _arg(node, 2, "bias")
    lf.kinds.append("linear")
    lf.emit(node, f"F.linear({x.text}, {w.text}" + (f", {lf.text(b)})" if b is not None else ")"))
