"""The running bound of a lifted backward, with its sums taken as the random walk the cotangent makes of their terms.

A backward is linear in its cotangent dy, and every correct implementation of it
is odd in dy: round to nearest commutes with negation (fl(-a) = -fl(a)), so
negating part of the cotangent negates each computed intermediate that is
linear in that part alone, and its error with it. A cotangent drawn with
independent, symmetric elements (normal with mean 0, or uniform on [-a, a]:
`symmetric`) therefore makes the signs of those errors independent fair coins
whatever x is: where a sum's terms read disjoint blocks of dy (each its own
element of dy; or, after a reduction within rows, its own row of it: the weight
gradients' sum over every row), their errors E_b (the statistics' errors, which
depend on x alone, times dy; the roundings on the way) add as a random walk, of
standard deviation at most √(Σ_b E_b²), where first order adds Σ_b E_b as if
each took its block's sign. C_SIGNS standard deviations are allowed, as C_ACC
allows for an accumulation's (Hoeffding puts the chance beyond k of them under
2·exp(-k²/2)). The sum's own accumulation error walks too: a sequential sum's
rounding at step k is uniform in ±(u/2)·|partial sum k|, and with terms of
independent signs E[partial_k²] ≤ Σ_b A_b² (A_b a block's Σ|a|) where coherent
terms give (k·a)²: the standard deviation is (u/√12)·√n·√(Σ_b A_b²) instead of
u·√n·Σ|a|/6, so the accumulation term C_ACC·u32·√n·Σ|a| (12 of the latter)
becomes at most C_ACC·√3·u32·√n·√(Σ_b A_b²) (12 of the former).

`CotangentWalker` is the FP64 walk (harness.program.interpret.Fp64Walker) with
each value tagged: free of dy (the inputs, the parameters, what only they
reach); `elementwise` (linear and odd in dy, each element reading one element of
dy, `src` its index: dy, times or divided by a dy-free value, sums and
differences of such values reading the same elements, casts, negation, shape
ops); `rows` (each index of dim 0 reading its own row of dy only, `src` that
row: also reductions over other dims); or neither (anything else: first order).
A sum or mean whose terms read distinct elements, or over dim 0 of a `rows`
value, walks; a program without a cotangent walks as before.
"""
from __future__ import annotations

import math

import numpy as np

from harness.program import bounds, ops
from harness.program.interpret import Fp64Walker
from harness.program.typecheck import reduce_axes
from harness.program.walk import is_scalar

# Standard deviations of the blocks' random walk allowed in a sum over them (as C_ACC for an accumulation's).
C_SIGNS = 2.0
FREE, ELEMENTWISE, ROWS = "free", "elementwise", "rows"


def symmetric(cotangent: dict) -> bool:
    """Whether a cotangent input object draws independent elements symmetric about 0 (harness.oracle.inputs)."""
    kind = cotangent.get("kind")
    if kind == "normal":
        return float(cotangent.get("mean", 0.0)) == 0.0
    if kind == "uniform":
        return float(cotangent.get("low", 0.0)) == -float(cotangent.get("high", 0.0))
    return False


def walker(cotangents: tuple[str, ...]) -> type:
    """The walker class for harness.program.evaluate(walker_class=...) whose inputs `cotangents` are
    symmetric cotangents (the others, and the parameters, are free of them)."""
    return type("CotangentWalker", (CotangentWalker,), {"cotangents": frozenset(cotangents)})


def _rows_valid(src: np.ndarray) -> bool:
    """Whether `src` (each element's row of dy) gives every index of dim 0 one row, a different one each."""
    if src.ndim == 0 or src.shape[0] == 0 or src.size == 0:
        return False
    flat = src.reshape(src.shape[0], -1)
    return bool((flat == flat[:, :1]).all()) and len(np.unique(flat[:, 0])) == flat.shape[0]


def _distinct(src: np.ndarray, axes: tuple[int, ...]) -> bool:
    """Whether the elements each reduction group (over `axes`) sums read distinct elements of dy."""
    moved = np.moveaxis(src, axes, tuple(range(src.ndim - len(axes), src.ndim)))
    flat = np.sort(moved.reshape(-1, int(np.prod([src.shape[a] for a in axes]))), axis=1)
    return bool((flat[:, 1:] != flat[:, :-1]).all())


class CotangentWalker(Fp64Walker):
    """Fp64Walker whose sums over terms reading disjoint blocks of a symmetric cotangent walk (module docstring)."""

    cotangents: frozenset = frozenset()

    def __init__(self, env, keep_stages=True):
        super().__init__(env, keep_stages)
        self._tags: dict[int, tuple[object, str, np.ndarray | None]] = {}  # id -> (value kept alive, tag, src)
        self._less = None  # the accumulation term the next emitted reduction gives back
        dys = [v for name, v in env.items() if name in self.cotangents and not is_scalar(v) and v.value.ndim]
        self._row_len = int(dys[0].value.size // dys[0].value.shape[0]) if len(dys) == 1 else None
        for name, v in env.items():
            if is_scalar(v) or not hasattr(v, "value"):
                continue
            if name not in self.cotangents:
                self._tag(v, FREE)
            elif self._row_len is not None and v.value.size:  # one cotangent: its elements are the blocks
                self._tag(v, ELEMENTWISE, np.arange(v.value.size).reshape(v.value.shape))
            elif v.value.ndim and _rows_valid(self._own_rows(v.value.shape)):  # several: each one's rows
                self._tag(v, ROWS, self._own_rows(v.value.shape))

    @staticmethod
    def _own_rows(shape):
        return np.broadcast_to(np.arange(shape[0]).reshape((-1,) + (1,) * (len(shape) - 1)), shape)

    def _tag(self, v, tag: str | None, src=None):
        if tag is not None:
            self._tags[id(v)] = (v, tag, None if src is None else np.asarray(src))
        return v

    def tag(self, v) -> tuple[str | None, np.ndarray | None]:
        if is_scalar(v):
            return FREE, None
        kept = self._tags.get(id(v))
        return (kept[1], kept[2]) if kept is not None and kept[0] is v else (None, None)

    def _rows_of(self, v, shape) -> np.ndarray | None:
        """v's rows of dy broadcast to `shape`, where every index of its dim 0 reads its own row; else None."""
        t, src = self.tag(v)
        if t not in (ELEMENTWISE, ROWS) or len(np.shape(v.value)) != len(shape):
            return None
        src = np.broadcast_to(src, v.value.shape)
        rows = src // self._row_len if t == ELEMENTWISE else src
        rows = np.broadcast_to(rows, shape)
        return rows if _rows_valid(rows) else None

    def _free(self, values, out):
        return self._tag(out, FREE if all(self.tag(v)[0] == FREE for v in values) else None)

    # ------------------------------------------------------------ the tags' rules
    def binop(self, op, a, b):
        out = super().binop(op, a, b)
        (ta, sa), (tb, sb) = self.tag(a), self.tag(b)
        shape = out.value.shape
        if ta == tb == FREE:
            return self._tag(out, FREE)
        if (op == "mul" and FREE in (ta, tb)) or (op == "div" and tb == FREE):
            v, (t, src) = (b, (tb, sb)) if ta == FREE else (a, (ta, sa))
            if t == ELEMENTWISE:
                return self._tag(out, ELEMENTWISE, np.broadcast_to(np.broadcast_to(src, v.value.shape), shape))
            rows = self._rows_of(v, shape) if t == ROWS else None
            return self._tag(out, ROWS if rows is not None else None, rows)
        if op in ("add", "sub") and ta in (ELEMENTWISE, ROWS) and tb in (ELEMENTWISE, ROWS):
            if ta == tb == ELEMENTWISE:
                ea = np.broadcast_to(np.broadcast_to(sa, a.value.shape), shape)
                if np.array_equal(ea, np.broadcast_to(np.broadcast_to(sb, b.value.shape), shape)):
                    return self._tag(out, ELEMENTWISE, ea)
            ra, rb = self._rows_of(a, shape), self._rows_of(b, shape)
            if ra is not None and rb is not None and np.array_equal(ra, rb):
                return self._tag(out, ROWS, ra)
        return out

    def neg(self, v):
        return self._tag(super().neg(v), *self.tag(v))

    def cast(self, node, v, dtype, like):
        return self._tag(super().cast(node, v, dtype, like), *self.tag(v))

    def unary(self, op, v):
        return self._free([v], super().unary(op, v))

    def call(self, op, vs, options):
        return self._free(vs, super().call(op, vs, options))

    def linear(self, v, weight, bias):
        return self._free([v, weight] + ([] if bias is None else [bias]), super().linear(v, weight, bias))

    def norm(self, node, v, normalized_shape, groups, weight, bias, eps):
        out = super().norm(node, v, normalized_shape, groups, weight, bias, eps)
        return self._free([p for p in (v, weight, bias) if p is not None], out)

    def cat(self, vs, dim):
        return self._free(vs, super().cat(vs, dim))

    def shape_op(self, op, v, args):
        out = super().shape_op(op, v, args)
        t, src = self.tag(v)
        if t in (ELEMENTWISE, ROWS):
            src = np.asarray(ops.get(op).apply(np.broadcast_to(src, v.value.shape), args))
            if t == ROWS and not _rows_valid(src):
                t = None
        return self._tag(out, t, src)

    def _emit(self, op, value, err, dtype, rows, exact=False):
        if self._less is not None:  # a walked reduction: its accumulation term as the walk bounds it
            less, self._less = self._less, None
            err = np.maximum(np.asarray(err, dtype=np.float64) - less.reshape(np.shape(value)), 0.0)
        return super()._emit(op, value, err, dtype, rows, exact)

    def reduce(self, node, v):
        t, src = self.tag(v)
        if t == FREE:
            return self._tag(super().reduce(node, v), FREE)
        if t not in (ELEMENTWISE, ROWS) or node.op not in ("sum", "mean"):
            return super().reduce(node, v)
        axes, n, shape = reduce_axes(node, self._type(v), self.line)
        rows = self._rows_of(v, v.value.shape)
        walk = None
        if t == ELEMENTWISE and _distinct(np.broadcast_to(src, v.value.shape), axes):
            walk = ((), axes)  # every term its own element of dy
        elif rows is not None and 0 in axes:
            walk = (tuple(a for a in axes if a != 0), (0,))  # every index of dim 0 its own row of dy
        if walk is not None:
            v, self._less = self._walked(v, walk[0], walk[1], n, node.op == "mean")
        try:
            out = super().reduce(node, v)
        finally:
            self._less = None
        if 0 in axes or rows is None:
            return out
        kept = rows
        for a in axes:
            kept = np.take(kept, [0], axis=a)
        return self._tag(out, ROWS, kept.reshape(shape))

    @staticmethod
    def _walked(v, inner: tuple[int, ...], outer: tuple[int, ...], n: int, mean: bool):
        """v with its errors scaled, in each group the reduction sums, so that they sum to min(Σ_b E_b,
        C_SIGNS·√(Σ_b E_b²)) (E_b a block's, summed over `inner`, blocks along `outer`); and, per group, how much
        smaller than C_ACC·u32·√n·Σ|a| the walk's accumulation term C_ACC·√3·u32·√n·√(Σ_b A_b²) is."""
        def blocks(a):
            return np.sum(a, axis=inner, keepdims=True) if inner else a

        err, mag = np.asarray(v.err, dtype=np.float64), np.abs(v.value)
        e_b, a_b = blocks(err), blocks(mag)
        linear = np.sum(e_b, axis=outer, keepdims=True)
        walked = C_SIGNS * np.sqrt(np.sum(e_b * e_b, axis=outer, keepdims=True))
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.where(linear > 0, np.minimum(1.0, walked / linear), 1.0)
        scale = np.where(np.isfinite(scale), scale, 1.0)
        acc = bounds.C_ACC * bounds.U32 * math.sqrt(n)
        first = acc * np.sum(a_b, axis=outer, keepdims=True)
        walk = acc * math.sqrt(3.0) * np.sqrt(np.sum(a_b * a_b, axis=outer, keepdims=True))
        less = np.where(np.isfinite(first) & np.isfinite(walk), first - np.minimum(first, walk), 0.0)
        return type(v)(v.value, err * scale, v.dtype, v.rows), less / n if mean else less
