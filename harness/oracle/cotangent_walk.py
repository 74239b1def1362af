"""The running bound of a lifted backward, with its sums over the rows taken as the random walk the cotangent makes.

A backward is linear in its cotangent dy, and every correct implementation of it
is odd in dy: round to nearest commutes with negation (fl(-a) = -fl(a)), so
negating the cotangent negates each computed intermediate that is linear in it,
and its error with it. When a sum runs over the rows (dim 0: the weight and bias
gradients' sum over every row) and each summand depends on its own row of dy
only, the error each row's summand carries (the statistics' errors of that row,
which depend on x alone, times dy; the roundings of that row's products) is
therefore σ_r·c_r, with σ_r the sign of that row of the cotangent. A cotangent
drawn with independent, symmetric elements (normal with mean 0, or uniform on
[-a, a]: `symmetric`) makes the σ_r independent fair signs whatever x is, so
the summands' errors add as a random walk: Σ_r σ_r·c_r has a standard deviation
of at most √(Σ_r E_r²) for |c_r| ≤ E_r, where the first-order bound adds Σ_r E_r
as if every row's error took the sign of its cotangent (n rows: √n times
tighter). C_SIGNS standard deviations are allowed, as C_ACC allows for an
accumulation's random walk (harness.program.bounds); Hoeffding's inequality
puts the chance beyond k of them under 2·exp(-k²/2). The sum's own
accumulation term (C_ACC·u32·√n·Σ|a|) is unchanged: its partial sums mix rows.

`CotangentWalker` is the FP64 walk (harness.program.interpret.Fp64Walker) with
each value tagged: free of dy (the inputs, the parameters, what only they
reach), `separable` (linear and odd in dy, each index of dim 0 reading its own
row of dy only: dy itself, times or divided by a dy-free value, sums and
differences of such values, casts, negation, reductions over other dims, and
shape ops that keep every row of dim 0 whole), or neither (anything else: the
first-order bound unchanged). Only a sum or mean over dim 0 of a separable value
changes its bound; a program without a cotangent walks as before.
"""
from __future__ import annotations

import functools

import numpy as np

from harness.program import ops
from harness.program.interpret import Fp64Walker
from harness.program.typecheck import reduce_axes
from harness.program.walk import is_scalar

# Standard deviations of the rows' random walk allowed in a sum over dim 0 (as C_ACC for an accumulation's).
C_SIGNS = 2.0
FREE, SEPARABLE = "free", "separable"


def symmetric(cotangent: dict) -> bool:
    """Whether a cotangent input object draws independent elements symmetric about 0 (harness.oracle.inputs)."""
    kind = cotangent.get("kind")
    if kind == "normal":
        return float(cotangent.get("mean", 0.0)) == 0.0
    if kind == "uniform":
        return float(cotangent.get("low", 0.0)) == -float(cotangent.get("high", 0.0))
    return False


@functools.lru_cache(maxsize=None)
def walker(cotangents: tuple[str, ...]) -> type:
    """The walker class for harness.program.evaluate(walker_class=...) whose inputs `cotangents` are
    symmetric cotangents (the others, and the parameters, are free of them); one class for each tuple of
    names (a gradient case has one to four), not one for each evaluation."""
    return type("CotangentWalker", (CotangentWalker,), {"cotangents": frozenset(cotangents)})


def _rows_kept(before: tuple[int, ...], after: np.ndarray) -> bool:
    """Whether `after` (an index array of dim-0 positions moved by a shape op) keeps each row whole: every index
    of its dim 0 holds one row of `before`, a different one each."""
    if after.ndim == 0 or after.shape[0] == 0 or after.size == 0 or not before:
        return False
    flat = after.reshape(after.shape[0], -1)
    return bool((flat == flat[:, :1]).all()) and len(np.unique(flat[:, 0])) == flat.shape[0]


class CotangentWalker(Fp64Walker):
    """Fp64Walker whose sums over dim 0 of values separable in the cotangent add their errors as a random walk."""

    cotangents: frozenset = frozenset()

    def __init__(self, env, keep_stages=True):
        super().__init__(env, keep_stages)
        self._tags: dict[int, tuple[object, str]] = {}  # id -> (the value, kept alive; its tag)
        for name, v in env.items():
            if not is_scalar(v) and hasattr(v, "value"):
                self._tag(v, SEPARABLE if name in self.cotangents and v.value.ndim else FREE)

    def _tag(self, v, tag: str | None):
        if tag is not None:
            self._tags[id(v)] = (v, tag)
        return v

    def tag(self, v) -> str | None:
        if is_scalar(v):
            return FREE
        kept = self._tags.get(id(v))
        return kept[1] if kept is not None and kept[0] is v else None

    def _free(self, values, out):
        return self._tag(out, FREE if all(self.tag(v) == FREE for v in values) else None)

    # ------------------------------------------------------------ the tags' rules
    def binop(self, op, a, b):
        out = super().binop(op, a, b)
        ta, tb = self.tag(a), self.tag(b)
        if ta == tb == FREE:
            return self._tag(out, FREE)

        def rows_of(v):  # a separable operand that is not broadcast along the result's dim 0
            return (not is_scalar(v) and v.value.ndim == out.value.ndim and out.value.ndim
                    and v.value.shape[0] == out.value.shape[0])

        if op == "mul" and {ta, tb} == {FREE, SEPARABLE}:
            sep = a if ta == SEPARABLE else b
            return self._tag(out, SEPARABLE if rows_of(sep) else None)
        if op == "div" and ta == SEPARABLE and tb == FREE:
            return self._tag(out, SEPARABLE if rows_of(a) else None)
        if op in ("add", "sub") and ta == tb == SEPARABLE:
            return self._tag(out, SEPARABLE if rows_of(a) and rows_of(b) else None)
        return out

    def neg(self, v):
        return self._tag(super().neg(v), self.tag(v))

    def cast(self, node, v, dtype, like):
        return self._tag(super().cast(node, v, dtype, like), self.tag(v))

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
        t = self.tag(v)
        if t == SEPARABLE:
            shape = v.value.shape
            index = np.broadcast_to(np.arange(shape[0]).reshape((-1,) + (1,) * (len(shape) - 1)), shape)
            t = SEPARABLE if _rows_kept(shape, np.asarray(ops.get(op).apply(index, args))) else None
        return self._tag(out, t)

    def reduce(self, node, v):
        t = self.tag(v)
        if t == FREE:
            return self._tag(super().reduce(node, v), FREE)
        if t != SEPARABLE or node.op not in ("sum", "mean"):
            return super().reduce(node, v)
        axes = reduce_axes(node, self._type(v), self.line)[0]
        if 0 not in axes:  # dim 0 stays first, each of its indices still reading its own row of dy
            return self._tag(super().reduce(node, v), SEPARABLE)
        return super().reduce(node, type(v)(v.value, self._walked(v.err, axes), v.dtype, v.rows))

    @staticmethod
    def _walked(err: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        """`err` scaled, within each group the reduction sums, so that its sum there is min(Σ_r E_r,
        C_SIGNS·√(Σ_r E_r²)), E_r the error of row r's part (summed over the group's other dims, which may
        share their errors): the first-order Σe the reduction adds becomes the rows' random walk."""
        others = tuple(a for a in axes if a != 0)
        per_row = np.sum(err, axis=others, keepdims=True) if others else err
        linear = np.sum(per_row, axis=0, keepdims=True)
        walk = C_SIGNS * np.sqrt(np.sum(per_row * per_row, axis=0, keepdims=True))
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.where(linear > 0, np.minimum(1.0, walk / linear), 1.0)
        scale = np.where(np.isfinite(scale), scale, 1.0)
        return err * scale

