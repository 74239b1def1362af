"""The FP64 reference of a program: exact math in float64 plus a running error bound.

Each tensor value carries its FP64 value (no intermediate rounding), the
dtype torch computes it in (typecheck.py's rules: explicit casts, promotion with
0-dim and Python-number priority, reductions keeping their dtype) and `err`,
a bound on how far a correct implementation's value may be from it
(bounds.py: first-order propagation plus one rounding per op into its dtype).
Everything is vectorised NumPy. Every intermediate is kept as a Stage, in
program order, for attribution of compiled intermediates.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import ml_dtypes
import numpy as np

from harness.core.dtypes import name_of, ulp
from harness.core.eps import torch_norm_eps
from harness.program import bounds, ops, statistics
from harness.program.typecheck import (
    TensorType,
    binary_type,
    call_type,
    cast_is_exact,
    cat_type,
    check,
    linear_type,
    norm_info,
    reduce_axes,
    shape_result,
)
from harness.program.ir import Program, ProgramCase, ones_value
from harness.program.walk import Walker, is_scalar

_MAX = {"float16": 65504.0, "bfloat16": float(ml_dtypes.finfo(ml_dtypes.bfloat16).max),
        "float32": float(np.finfo(np.float32).max)}


class Stage(NamedTuple):
    """One intermediate: the statement it belongs to ("return" for the last), op, dtype, value, bound."""
    name: str
    op: str
    dtype: str
    value: np.ndarray
    err: np.ndarray


@dataclass(frozen=True)
class _Rows:
    """The statistics behind a value: which row of statistic `seq` each element belongs to.

    `ids` (ints, broadcastable to the value's shape) numbers the rows of the
    latest statistic reaching the value, each taken over `length` elements;
    shape ops move the ids with the values, so a norm over dim 1, a view or a
    permute keeps each element in its row.
    """
    seq: int
    ids: np.ndarray
    length: int


@dataclass
class _V:
    value: np.ndarray
    err: np.ndarray
    dtype: str
    rows: _Rows | None = None


@dataclass(frozen=True)
class Evaluation:
    """A program evaluated in FP64 with its error bound.

    `rows[i]` is element i's normalization row (elements sharing the
    non-reduced indices of the statistics that reach the output), `row_len`
    the elements a row's statistics are taken over. `finite` is False where
    FP64 itself is inf/nan (`nonfinite_stage` names the first such stage);
    `overflow_stage` is the first stage whose value lies beyond its dtype's
    range (torch gives inf there).
    """
    out: np.ndarray
    out_dtype: str
    bound: np.ndarray
    stages: tuple[Stage, ...]
    rows: np.ndarray
    row_len: int
    finite: bool = True
    nonfinite_stage: str | None = None
    overflow_stage: str | None = None
    # A program returning several outputs (`return y, r`): one Evaluation per output, in order, each with its
    # own value, bound and rows (the stages shared); the fields above are then the first output's. () for one.
    outputs: tuple["Evaluation", ...] = ()
    names: tuple[str, ...] = ()  # the outputs' names (Program.output_names), with `outputs`

    @property
    def each(self) -> tuple["Evaluation", ...]:
        """One Evaluation per output: itself for a program of one output."""
        return self.outputs or (self,)


def _later(a: _Rows | None, b: _Rows | None) -> _Rows | None:
    if a is None or b is None:
        return a or b
    return a if a.seq >= b.seq else b


class Fp64Walker(Walker):
    """Evaluates the IR on _V values."""

    def __init__(self, env, keep_stages=True):
        super().__init__(env)
        self.stages: list[Stage] = []
        self.keep = keep_stages
        self.seq = 0
        self.nonfinite = None
        self.overflow = None

    def shape(self, v):
        return v.value.shape

    def dtype(self, v):
        return v.dtype

    def _type(self, v):
        return v if is_scalar(v) else TensorType(v.value.shape, v.dtype)

    def _emit(self, op, value, err, dtype, rows, exact=False):
        value = np.asarray(value, dtype=np.float64)
        err = np.broadcast_to(np.asarray(err, dtype=np.float64), value.shape)
        if not exact:
            err = err + bounds.rounding(value, dtype)
        finite = np.isfinite(value)
        err = np.where(finite & ~np.isnan(err), err, np.inf)
        label = f"{self.target}:{op}"
        if self.nonfinite is None and not finite.all():
            self.nonfinite = label
        if self.overflow is None and dtype in _MAX:
            limit = _MAX[dtype] + 0.5 * float(ulp(np.float64(_MAX[dtype]), dtype))
            if (np.abs(value[finite]) >= limit).any():
                self.overflow = label
        if self.keep:
            self.stages.append(Stage(self.target, op, dtype, value, err))
        return _V(value, err, dtype, rows)

    def _operand(self, v, dtype):
        """(value, err) of an operand inside a `dtype` op."""
        if is_scalar(v):
            return float(v), bounds.scalar_error(v, dtype)
        if cast_is_exact(v.dtype, dtype):
            return v.value, v.err
        return v.value, v.err + bounds.rounding(v.value, dtype)  # a wider 0-dim operand

    # ---------------------------------------------------------------- ops
    def binop(self, op, a, b):
        dtype = binary_type(op, self._type(a), self._type(b), self.line).dtype
        av, ae = self._operand(a, dtype)
        bv, be = self._operand(b, dtype)
        with np.errstate(all="ignore"):
            if op in ("add", "sub"):
                z, e = bounds.add(av, ae, bv, be, 1.0 if op == "add" else -1.0)
            elif op == "mul":
                z, e = bounds.mul(av, ae, bv, be)
            elif op == "div":
                z, e = bounds.div(np.asarray(av), np.asarray(ae), np.asarray(bv), np.asarray(be))
            elif is_scalar(a):
                z, e = bounds.rpower(av, ae, bv, be)
            else:
                z, e = bounds.power(av, ae, bv, be, is_scalar(b))
        rows = _later(None if is_scalar(a) else a.rows, None if is_scalar(b) else b.rows)
        return self._emit(op, z, e, dtype, rows)

    def neg(self, v):
        return self._emit("neg", -v.value, v.err, v.dtype, v.rows, exact=True)

    def cast(self, node, v, dtype, like):
        return self._emit("cast", v.value, v.err, dtype, v.rows, exact=cast_is_exact(v.dtype, dtype))

    def unary(self, op, v):
        entry = ops.get(op)
        with np.errstate(all="ignore"):
            if entry.exact:
                return self._emit(op, entry.value(v.value), v.err, v.dtype, v.rows, exact=True)
            z, e = entry.bound(v.value, v.err)
        return self._emit(op, z, e, v.dtype, v.rows)

    def run(self, program: Program):
        self.statistics = statistics.of(program)
        self.centering = {}  # a centering mean's value number -> (axes, T, M) as this walk evaluated them
        return super().run(program)

    def reduce(self, node, v):
        axes, n, shape = reduce_axes(node, self._type(v), self.line)
        with np.errstate(all="ignore"):
            z, e = bounds.reduction(node.op, v.value, v.err, axes, node.correction)
            moment = self.statistics.second(node)
            formed = self.centering.get(moment.mean) if moment is not None and moment.centered else None
            if formed is not None and formed[0] == axes and formed[1].value.shape == v.value.shape:
                # a centred moment: M's error enters to second order only (bounds.centered_moment), both bounds hold
                e = np.minimum(e, bounds.centered_moment(node.op, formed[1].value, formed[1].err, formed[2].err,
                                                         axes, v.dtype))
        kept = z.shape  # keepdims
        rows = _Rows(self._next(), np.arange(int(np.prod(kept))).reshape(kept).reshape(shape), n)
        z, e = z.reshape(shape), e.reshape(shape)
        out = self._emit(node.op, z, e, v.dtype, rows)
        center = self.statistics.mean(node)
        if center is not None:
            self.centering[center] = (axes, v, out)
        return out

    def shape_op(self, op, v, args):
        """Exact: values, bounds and row ids go through the same NumPy call (no stage: nothing is computed)."""
        shape_result(op, v.value.shape, args, self.line)
        apply = ops.get(op).apply
        rows = v.rows
        if rows is not None:
            rows = _Rows(rows.seq, apply(np.broadcast_to(rows.ids, v.value.shape), args), rows.length)
        return _V(np.ascontiguousarray(apply(v.value, args)), np.ascontiguousarray(apply(v.err, args)), v.dtype,
                  rows)

    def cat(self, vs, dim):
        """Exact (promotion widens): values and bounds concatenated; each part keeps its rows, numbered apart."""
        t, d = cat_type([self._type(v) for v in vs], dim, self.line)
        rows = None
        if all(v.rows is not None for v in vs):
            ids, start = [], 0
            for v in vs:
                part = np.broadcast_to(v.rows.ids, v.value.shape).astype(np.int64)
                if part.size == 0:  # an empty slice (narrow of length 0) holds no rows
                    ids.append(part)
                    continue
                ids.append(part - part.min() + start)
                start = int(ids[-1].max()) + 1
            rows = _Rows(max(v.rows.seq for v in vs), np.concatenate(ids, axis=d), max(v.rows.length for v in vs))
        apply = ops.get("cat").apply
        return _V(apply([v.value for v in vs], d), apply([v.err for v in vs], d), t.dtype, rows)

    def linear(self, v, weight, bias):
        t = linear_type(self._type(v), self._type(weight), None if bias is None else self._type(bias), self.line)
        with np.errstate(all="ignore"):
            z, e = bounds.linear(v.value, v.err, weight.value, weight.err,
                                 None if bias is None else bias.value, None if bias is None else bias.err)
        rows = v.rows  # each output element reads its input row whole: the row of that input row's statistics
        if rows is not None and np.shape(rows.ids)[-1:] not in ((), (1,)):
            rows = None
        return self._emit("linear", z, e, t.dtype, rows)

    def call(self, op, vs, options):
        """A call op by its bound rule (harness.program.calls), rounded into its dtype unless exact."""
        t = call_type(op, [self._type(v) for v in vs], options, self.line)
        entry = ops.get(op)
        with np.errstate(all="ignore"):
            z, e = entry.bound([v.value for v in vs], [v.err for v in vs], options)
            if op == "clamp":  # a bound is a Python number, which an implementation may hold in the dtype
                e = e + sum(bounds.scalar_error(options[k], t.dtype) for k in ("min", "max") if options[k] is not None)
        rows = vs[0].rows if entry.rows == "keep" else None
        if entry.rows == "along":
            dim = options["dim"] % max(len(t.shape), 1)
            kept = tuple(1 if i == dim else n for i, n in enumerate(t.shape))
            rows = _Rows(self._next(), np.arange(int(np.prod(kept))).reshape(kept), t.shape[dim] if t.shape else 1)
        return self._emit(op, z, e, t.dtype, rows, exact=entry.exact)

    def _next(self):
        self.seq += 1
        return self.seq

    def norm(self, node, v, normalized_shape, groups, weight, bias, eps):
        types = [None if p is None else self._type(p) for p in (weight, bias)]
        info = norm_info(node, self._type(v), normalized_shape, groups, *types, eps, self.line)
        shape, rank = v.value.shape, v.value.ndim
        eps = torch_norm_eps(node.kind, eps)
        a, ea, axes = v.value, v.err, info.axes
        pshape = shape[rank - len(normalized_shape):] if normalized_shape is not None else (shape[1],) + (1,) * (rank - 2)
        if node.kind == "group_norm":
            a, ea, axes = a.reshape(shape[0], info.groups, -1), ea.reshape(shape[0], info.groups, -1), (2,)
        with np.errstate(all="ignore"):
            z, e = bounds.normalize(node.kind, a, ea, axes, float(eps))
            z, e = z.reshape(shape), e.reshape(shape)
            out, err = z, e
            if weight is not None:
                wv, we = weight.value.reshape(pshape), weight.err.reshape(pshape)
                out, err = z * wv, np.abs(wv) * e + np.abs(z) * we + bounds.rounding(z * wv, v.dtype)
            if bias is not None:
                bv, be = bias.value.reshape(pshape), bias.err.reshape(pshape)
                out, err = out + bv, err + be
        rows = _Rows(self._next(), _norm_row_ids(shape, info, node.kind), info.n)
        return self._emit(node.kind, out, err, v.dtype, rows)


def _norm_row_ids(shape: tuple[int, ...], info, kind: str) -> np.ndarray:
    """An F.* norm's rows: one per index of the dims it does not normalize (group_norm: per group of channels)."""
    kept = tuple(1 if i in info.axes else n for i, n in enumerate(shape))
    ids = np.arange(int(np.prod(kept))).reshape(kept)
    if kind == "group_norm":  # rows are (sample, group): channels c share the row of group c // (C / G)
        channels = shape[1]
        group = (np.arange(channels) // (channels // info.groups)).reshape((1, channels) + (1,) * (len(shape) - 2))
        ids = ids * info.groups + group
    return ids


def row_ids(shape: tuple[int, ...], rows: _Rows | None) -> tuple[np.ndarray, int]:
    """Each element's row (as Evaluation.rows, numbered 0, 1, … in order) and the row length.

    A value no statistic reaches has the rows of its last dim.
    """
    rank = len(shape)
    if rows is None:
        if not rank:
            return np.zeros((), dtype=np.int64), 1
        ids = np.arange(int(np.prod(shape[:-1]))).reshape(shape[:-1] + (1,))
        return np.ascontiguousarray(np.broadcast_to(ids, shape)), int(shape[-1])
    ids = np.broadcast_to(np.asarray(rows.ids, dtype=np.int64), shape)
    _, dense = np.unique(ids, return_inverse=True)
    return np.ascontiguousarray(dense.reshape(shape)), int(rows.length)


def _array(arrays, name, shape, dtype, default=None):
    if name not in arrays:
        if default is None:
            raise ValueError(f"evaluate: no array for {name!r}")
        return np.full(shape, default, dtype=np.float64)
    a = np.asarray(arrays[name])
    if name_of(a.dtype) != dtype:
        raise ValueError(f"evaluate: {name!r} is {name_of(a.dtype)}, the case says {dtype}")
    if tuple(a.shape) != tuple(shape):
        raise ValueError(f"evaluate: {name!r} has shape {list(a.shape)}, the case says {list(shape)}")
    return a.astype(np.float64)


def evaluate(program: Program, info: ProgramCase, arrays: dict, *, keep_stages: bool = True,
             walker_class: type | None = None) -> Evaluation:
    """Evaluate `program` in FP64 from the rounded arrays of x (y, r) and w, b, s.

    A parameter the program reads but `arrays` lacks is ones (w, s) or zeros (b),
    as in the torch module. `keep_stages=False` drops the intermediates (memory).
    `walker_class` is a subclass of Fp64Walker recording more (harness.program.expand).
    """
    check(program, info)
    env = {"eps": info.eps}
    for name in info.inputs:
        if name not in program.reads and name not in arrays:
            continue
        shape, dtype = info.input_type(name)
        value = _array(arrays, name, shape, dtype)
        env[name] = _V(value, np.zeros_like(value), dtype)
    for name in program.params:
        value = _array(arrays, name, info.param_shapes[name], info.weight_dtype, ones_value(name))
        env[name] = _V(value, np.zeros_like(value), info.weight_dtype)
    walker = (walker_class or Fp64Walker)(env, keep_stages)
    out = walker.run(program)
    stages = tuple(walker.stages)
    each = [_evaluation(v, stages, walker) for v in (out if isinstance(out, tuple) else (out,))]
    if len(each) == 1:
        return each[0]
    return replace(each[0], outputs=tuple(each), names=program.output_names)


def _evaluation(out: _V, stages: tuple, walker) -> Evaluation:
    """The Evaluation of one returned value."""
    rows, row_len = row_ids(out.value.shape, out.rows)
    finite = bool(np.isfinite(out.value).all())
    return Evaluation(out.value, out.dtype, out.err, stages, rows, row_len, finite, walker.nonfinite, walker.overflow)

