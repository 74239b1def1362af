"""The lifter's handlers of shape ops: views, permutes, slices and splits, written with the sizes torch.export
fixed (each node's metadata), and the tuple items a split or a norm kernel gives."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.modules.lift_ops import Lifter, Val, _Unread, _arg, _fresh, _num
from harness.modules.load import Unliftable
from harness.program.ir import Cat, ShapeOp


# -- shape ops: the sizes torch.export fixed ---------------------------------------------------------------
def _sizes(shape) -> tuple:
    return tuple(_num(n) for n in shape)


def _to_shape(lf: Lifter, node):
    """view, reshape, flatten, unflatten, squeeze, unsqueeze: a view to the node's own shape."""
    a = lf.tensor(node, node.args[0])
    out = tuple(int(n) for n in node.meta["val"].shape)
    if out == a.shape:
        lf.alias(node, node.args[0])
        return
    packet = str(node.target).split(".")[1]
    if packet == "unsqueeze" and len(out) == len(a.shape) + 1:
        lf.emit(node, ShapeOp("unsqueeze", a.expr, (_num(node.args[1]),)))
    elif packet == "squeeze" and len(out) < len(a.shape):
        dims = node.args[1] if len(node.args) > 1 else ()
        dims = [dims] if isinstance(dims, int) else list(dims)
        lf.emit(node, ShapeOp("squeeze", a.expr, _sizes(dims)))
    elif packet == "reshape":
        lf.emit(node, ShapeOp("reshape", a.expr, _sizes(out)))
    else:
        lf.emit(node, ShapeOp("view", a.expr, _sizes(out)))


def _expand(lf: Lifter, node):
    a = lf.tensor(node, node.args[0])
    out = tuple(int(n) for n in node.meta["val"].shape)
    lf.alias(node, node.args[0]) if out == a.shape else lf.emit(node, ShapeOp("expand", a.expr, _sizes(out)))


def _repeat(lf: Lifter, node):
    """t.repeat(reps) (F.instance_norm repeats its weight per sample; its backward sums the copies back) as a
    view interleaving a size-1 dim before each dim, an expand of those to the repeats, and a reshape: exact."""
    a = lf.tensor(node, node.args[0])
    reps = tuple(int(r) for r in node.args[1])
    shape = (1,) * (len(reps) - len(a.shape)) + a.shape
    inter = tuple(n for size in shape for n in (1, size))
    spread = tuple(n for rep, size in zip(reps, shape) for n in (rep, size))
    out = tuple(rep * size for rep, size in zip(reps, shape))
    lf.emit(node, ShapeOp("reshape", ShapeOp("expand", ShapeOp("view", a.expr, _sizes(inter)), _sizes(spread)),
                          _sizes(out)))


def _permute(lf: Lifter, node):
    a = lf.tensor(node, node.args[0])
    dims = list(node.args[1])
    if dims == list(range(len(a.shape))):
        lf.alias(node, node.args[0])
        return
    lf.emit(node, ShapeOp("permute", a.expr, _sizes(dims)))


def _transpose(lf: Lifter, node):
    a = lf.tensor(node, node.args[0])
    if str(node.target).startswith("aten.t."):
        if len(a.shape) < 2:
            lf.alias(node, node.args[0])
            return
        d0, d1 = 0, 1
    else:
        d0, d1 = node.args[1], node.args[2]
    lf.emit(node, ShapeOp("transpose", a.expr, (_num(d0), _num(d1))))


def _narrow(a: Val, dim, start, length):
    """a.narrow(dim, start, length), or a itself when that is all of it."""
    if start == 0 and length == a.shape[dim]:
        return a.expr
    return ShapeOp("narrow", a.expr, (_num(dim), _num(start), _num(length)))


def _slice(lf: Lifter, node):
    a = lf.tensor(node, node.args[0])
    dim = _arg(node, 1, "dim", 0) % len(a.shape)
    size = a.shape[dim]
    start, end, step = _arg(node, 2, "start", 0), _arg(node, 3, "end", None), _arg(node, 4, "step", 1)
    if step != 1:
        lf.fail(node, f"slices with step {step} (the language takes contiguous slices: narrow)")
    start = 0 if start is None else (start + size if start < 0 else start)
    end = size if end is None else min(end + size if end < 0 else end, size)
    expr = _narrow(a, dim, max(start, 0), max(end - start, 0))
    lf.alias(node, node.args[0]) if expr == a.expr else lf.emit(node, expr)


def _narrow_node(lf: Lifter, node):
    a = lf.tensor(node, node.args[0])
    dim = node.args[1] % len(a.shape)
    start = node.args[2] + a.shape[dim] if node.args[2] < 0 else node.args[2]
    expr = _narrow(a, dim, start, node.args[3])
    lf.alias(node, node.args[0]) if expr == a.expr else lf.emit(node, expr)


def _select(lf: Lifter, node):
    a = lf.tensor(node, node.args[0])
    dim = node.args[1] % len(a.shape)
    index = node.args[2] % a.shape[dim]
    narrowed = ShapeOp("narrow", a.expr, (_num(dim), _num(index), _num(1)))
    lf.emit(node, ShapeOp("squeeze", narrowed, (_num(dim),)))


def _split(lf: Lifter, node):
    """split / split_with_sizes / chunk / unbind: a tuple of narrows, each written as it is read."""
    a = lf.tensor(node, node.args[0])
    packet = str(node.target).split(".")[1]
    metas = node.meta["val"]
    dim = (_arg(node, 1, "dim", 0) if packet == "unbind" else _arg(node, 2, "dim", 0)) % len(a.shape)
    items, start = [], 0
    for i, meta in enumerate(metas):
        length = 1 if packet == "unbind" else int(meta.shape[dim])
        expr = _narrow(a, dim, start, length)
        if packet == "unbind":
            expr = ShapeOp("squeeze", expr, (_num(dim),))
        items.append(_Lazy(node.name + f"_{i}", expr, meta))
        start += length
    lf.env[node.name] = tuple(items)


@dataclass(frozen=True)
class _Lazy:
    """A tuple item not written yet: getitem writes it (an unread chunk costs no statement)."""
    name: str
    expr: Any
    meta: Any


def _getitem(lf: Lifter, node):
    items = lf.value(node.args[0])
    item = items[node.args[1]]
    if isinstance(item, _Unread):
        raise Unliftable(f"class {lf.owner}: reads the statistics a {item.kind} kernel returns (item "
                         f"{item.index}), which the program language does not give out")
    if isinstance(item, _Lazy):
        name = _fresh(item.name, lf.taken)
        lf.assign(name, item.expr)
        item = Val(name, item.meta)
    lf.env[node.name] = item


def _cat(lf: Lifter, node):
    """cat / concat: torch.cat([...], dim) of the tensors it joins (one tensor is that tensor)."""
    parts = [lf.tensor(node, a) for a in node.args[0]]
    dim = _arg(node, 1, "dim", 0)
    if len(parts) == 1:
        lf.alias(node, node.args[0][0])
        return
    lf.emit(node, Cat(tuple(p.expr for p in parts), int(dim)))


def _identity(lf: Lifter, node):
    lf.alias(node, node.args[0])


def _expand_as(lf: Lifter, node):
    _expand(lf, node)
