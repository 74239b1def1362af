"""Witnesses for any program: the IR run in NumPy, in the program's own dtypes, as correct implementations run it.

The comparator holds a compiled path to what correct implementations achieve
on a case's very rows (docs/tolerance.md, "What a correct float32 implementation
achieves"). For a program that means running the program itself the ways a
correct implementation may, so `NumpyWalker` interprets the IR with torch's
CPU semantics, op by op:

* an elementwise op is the op table's NumPy form (harness.program.ops: a new
  elementwise op needs no code here), computed in float32 and rounded once
  to its dtype (ATen's opmath for float16/bfloat16); shape ops are the
  table's exact NumPy calls;
* a Python number is kept in float32 inside a multiply or a division (ATen
  reads a wrapped number as opmath there) and rounded to the tensor's dtype
  in an add, a subtract or as a power's exponent (ATen's add kernel and
  pow take it as the scalar type); `c / t` is reciprocal(t)·c and `t ** k`
  takes ATen's special cases (k = 2, 3, -2, ±0.5, -1), as torch's own
  Tensor methods do; a float32 sqrt or power is correctly rounded (torch's
  vectorised ones are within an ULP of it);
* a reduction accumulates in float32 and rounds once to its dtype (mean:
  the float32 sum divided by n, as ATen's mean does for every dtype);
  F.linear is, per output, a float32 sum of the float32 products;
* F.layer_norm / F.rms_norm / F.group_norm keep their statistics and the
  normalized value in float32 and round once to the output dtype (ATen's
  CPU kernels: RowwiseMoments, then (x - mean)·rstd·w + b in opmath).

Only the order in which a reduction adds its terms is left open, and each
witness fixes one order (harness.program.accumulate.Accumulation):

* sequential: each sum added left to right (a scalar loop: TVM's lowering of
  every reduction, ATen's for short outer reductions);
* pairwise: NumPy's pairwise summation (a tree, like eager's cascade sum);
* blocked: 4 contiguous blocks, each sequential, then the partial sums in
  order (a parallel reduction over threads or tiles);

and, where the program asks for a variance (`var`), an F.* norm, or writes a
moment out as reductions (harness.program.statistics), how the moments are
formed: two-pass (the mean, then the squared deviations from it)
or Welford (one element at a time; blocked: Welford per block, combined by
Chan et al.'s update; lanes: Welford in 8 interleaved lanes, combined by
Chan's update, ATen's vectorized moments), as Inductor's and ATen's running
statistics do; for
rms_norm the moment is the mean of squares, kept as a running mean.

Each is a legitimate implementation of the program: IEEE arithmetic in the
very dtypes torch's rules give each op, rounding exactly where the program
rounds, with the float32 accumulation correct CPU kernels owe every float
dtype, in an order a shipped compiler or library uses. An error one of them
makes on a row is one a correct implementation makes, so no compiled path is
blamed for it. tests/program/test_witness_run.py checks them against eager:
bit for bit where torch's order is known (elementwise ops, a vertical sum of
16 rows), within the program's bound everywhere.
"""
from __future__ import annotations

import numpy as np

from harness.core.dtypes import name_of, np_dtype
from harness.core.eps import torch_norm_eps
from harness.program import calls, ops, statistics
from harness.program.accumulate import Accumulation, moments, row_sum
from harness.program.typecheck import (
    TensorType,
    binary_type,
    call_type,
    cat_type,
    linear_type,
    norm_info,
    reduce_axes,
    shape_result,
)
from harness.program.ir import Program, ProgramCase, ones_value
from harness.program.walk import Walker, is_scalar

WITNESSES = (
    Accumulation("sequential two-pass", "sequential", "two_pass"),
    Accumulation("sequential Welford", "sequential", "welford"),
    Accumulation("pairwise two-pass", "pairwise", "two_pass"),
    Accumulation("blocked two-pass", "blocked", "two_pass"),
    Accumulation("blocked Welford", "blocked", "welford"),
    # ATen's vectorized moments (its CPU layer_norm): on a float32 row of 4096 alternating 79,999 / 80,001,
    # F.layer_norm errs 4.4e-4 where two-pass errs 3.7e-7 (2026-12-04), so a rewrite into that kernel is correct
    Accumulation("lanes Welford", "lanes", "welford"),
)


# ------------------------------------------------------------------------------------ the walker
def to_end(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """`a` with `axes` moved last and flattened into one: (..., n)."""
    moved = np.moveaxis(a, axes, tuple(range(a.ndim - len(axes), a.ndim)))
    return moved.reshape(moved.shape[: a.ndim - len(axes)] + (-1,))


class NumpyWalker(Walker):
    """The IR in NumPy arrays of the program's dtypes, with torch's CPU roundings and `acc`'s order.

    Values are NumPy arrays (bfloat16 as ml_dtypes); `self.dtype` of a value
    is its array's dtype. Subclasses may change what an op computes (the
    benchmark's renderings) through the same hooks.
    """

    COMPUTE = np.float32  # opmath: float16/bfloat16/float32 ops are computed in float32

    def __init__(self, env: dict, acc: Accumulation):
        super().__init__(env)
        self.acc = acc
        self.took_moments = False  # a var, an F.* norm or a written-out moment ran (Welford differs there)
        self.reduced = False       # some reduction added terms (otherwise every order gives the same bits)

    def shape(self, a):
        return a.shape

    def dtype(self, a):
        return name_of(a.dtype)

    def _type(self, v):
        return v if is_scalar(v) else TensorType(v.shape, self.dtype(v))

    def round(self, value, dtype: str) -> np.ndarray:
        """A computed value rounded to an op's dtype."""
        return np.asarray(value).astype(np_dtype(dtype))

    def _operand(self, v, dtype: str, scalar_in_dtype: bool = False):
        """An operand of a `dtype` op, in the compute dtype (a wider 0-dim tensor first rounds to dtype;
        a Python number too where `scalar_in_dtype`, else it stays in the compute dtype)."""
        if is_scalar(v):
            return self.round(v, dtype).astype(self.COMPUTE) if scalar_in_dtype else self.COMPUTE(v)
        if self.dtype(v) != dtype:
            v = self.round(v, dtype)
        return np.asarray(v).astype(self.COMPUTE)

    # ---------------------------------------------------------------- elementwise
    def binop(self, op, a, b):
        dtype = binary_type(op, self._type(a), self._type(b), self.line).dtype
        # ATen's add/sub take a Python number in the tensor's dtype; mul/div read it as opmath
        in_dtype = op in ("add", "sub")
        x, y = self._operand(a, dtype, in_dtype), self._operand(b, dtype, in_dtype)
        with np.errstate(all="ignore"):
            if op == "div" and is_scalar(a):
                # torch's Tensor.__rtruediv__: c / t is reciprocal(t) * c, two roundings
                return self.round(self.round(self.COMPUTE(1) / y, dtype).astype(self.COMPUTE) * x, dtype)
            if op == "pow" and is_scalar(b):
                return self._power(a, b, dtype)
            return self.round(ops.get(op).value(x, y), dtype)  # the op table's NumPy form

    def _power(self, a, k, dtype):
        """t ** k for a Python number k, with ATen's special cases (pow_tensor_scalar)."""
        x = self._operand(a, dtype)
        one = self.COMPUTE(1)
        if k == 2:
            return self.round(x * x, dtype)
        if k in (3, -2):
            # float32: base*base*base and 1/(base*base) in float32; bfloat16: each product
            # rounded to bfloat16 (the kernel runs in the scalar type); float16: std::pow in float
            sq = x * x
            if dtype == "bfloat16":
                sq = self.round(sq, dtype).astype(self.COMPUTE)
            if dtype == "float16":
                return self.round(np.power(x, self._operand(k, dtype, True)), dtype)
            return self.round(sq * x if k == 3 else one / sq, dtype)
        if k == 0.5:
            return self.round(self.sqrt(x), dtype)
        if k == -0.5:
            return self.round(self.rsqrt(x), dtype)
        if k == -1:
            return self.round(one / x, dtype)
        if dtype == "float32":  # correctly rounded (torch's vectorized powf is within 1 ULP of it)
            return self.round(np.power(x.astype(np.float64), float(k)), dtype)
        return self.round(np.power(x, self._operand(k, dtype, True)), dtype)  # the exponent in the dtype

    def neg(self, a):
        return -a

    def cast(self, node, a, dtype, like):
        return self.round(a, dtype)

    def unary(self, op, a):
        """An elementwise op by the op table's NumPy form, in the compute dtype, rounded once to a's dtype."""
        entry = ops.get(op)
        if entry.exact:
            return np.asarray(entry.value(a)).astype(a.dtype)
        dtype = self.dtype(a)
        x = self._operand(a, dtype)
        with np.errstate(all="ignore"):
            z = self.rsqrt(x) if op == "rsqrt" else self.sqrt(x) if op == "sqrt" else entry.value(x)
        return self.round(np.asarray(z).astype(self.COMPUTE), dtype)

    def rsqrt(self, x):
        """1/sqrt(x) in the compute dtype (ATen's Vectorized rsqrt: a division by a correctly rounded sqrt)."""
        return ops.get("rsqrt").value(x).astype(x.dtype)

    def sqrt(self, x):
        return ops.get("sqrt").value(x)

    def shape_op(self, op, a, args):
        """Exact: the op table's NumPy call on the array itself."""
        shape_result(op, a.shape, args, self.line)
        return np.ascontiguousarray(ops.get(op).apply(a, args))

    def cat(self, arrays, dim):
        """Exact: the operands widened to their promoted dtype, concatenated."""
        t, d = cat_type([self._type(a) for a in arrays], dim, self.line)
        return ops.get("cat").apply([self.round(a, t.dtype) for a in arrays], d)

    def linear(self, a, weight, bias):
        """x @ W.T + b: each output a float32 sum, in `acc`'s order, of the rounded float32 products."""
        dtype = linear_type(self._type(a), self._type(weight), None if bias is None else self._type(bias),
                            self.line).dtype
        x, w = self._operand(a, dtype), self._operand(weight, dtype)
        self.reduced = self.reduced or x.shape[-1] > 1
        with np.errstate(all="ignore"):
            out = np.stack([self.sum(x * w[j]) for j in range(w.shape[0])], axis=-1)
            if bias is not None:
                out = out + self._operand(bias, dtype)
        return self.round(out, dtype)

    # ------------------------------------------------------------------ the ops around a norm
    def call(self, op, arrays, options):
        """A call op as torch's CPU kernels compute it: in float32 (opmath), sums in `acc`'s order (matmul,
        softmax's denominator, avg_pool's windows; cumsum is a sequential scan), rounded once to the dtype;
        the exact ones (max_pool, interpolate, clamp, ones_like) on the values themselves."""
        dtype = call_type(op, [self._type(a) for a in arrays], options, self.line).dtype
        entry = ops.get(op)
        a = arrays[0]
        if op == "interpolate":
            return np.ascontiguousarray(calls.interpolate_apply(a, options))
        if op == "ones_like":
            return np.ones_like(a)
        if op == "clamp":
            lo, hi = (None if options[k] is None else self.round(options[k], dtype) for k in ("min", "max"))
            return np.clip(a, lo, hi).astype(a.dtype)
        x = self._operand(a, dtype)
        with np.errstate(all="ignore"):
            if op == "matmul":
                z = self.matmul(x, self._operand(arrays[1], dtype))
            elif op in ("softmax", "cumsum"):
                moved = np.moveaxis(x, options["dim"], -1)
                self.reduced = self.reduced or moved.shape[-1] > 1
                z = np.moveaxis(self.cumsum(moved) if op == "cumsum" else self.softmax(moved), -1, options["dim"])
            elif "pool" in entry.extra:
                z = self.pool(x, entry.extra["pool"], entry.extra["spatial"], options)
            else:
                z = self.activation(op, x, options)
        return self.round(np.asarray(z).astype(self.COMPUTE), dtype)

    def cumsum(self, x):
        """A prefix sum over the last axis: a sequential float32 scan (ATen's CPU cumsum)."""
        return np.add.accumulate(x, axis=-1, dtype=self.COMPUTE)

    def softmax(self, x):
        """Over the last axis: the max shift, exp in float32, the sum in `acc`'s order, one division."""
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / self.sum(e)[..., None]

    def activation(self, op, x, options):
        """gelu, elu, hardswish: the op table's NumPy form, rounded to float32."""
        return np.asarray(ops.get(op).value(x, **options)).astype(self.COMPUTE)

    def matmul(self, x, w):
        """a @ b: each output a float32 sum, in `acc`'s order, of the rounded float32 products."""
        a2 = x[None, :] if x.ndim == 1 else x
        b2 = w[:, None] if w.ndim == 1 else w
        self.reduced = self.reduced or a2.shape[-1] > 1
        products = a2[..., :, :, None] * b2[..., None, :, :]  # (..., M, K, N)
        z = self.sum(np.swapaxes(products, -1, -2))          # (..., M, N)
        if w.ndim == 1:
            z = z[..., 0]
        if x.ndim == 1:
            z = z[..., 0, :] if w.ndim > 1 else z[..., 0]
        return z

    def pool(self, x, kind, n, options):
        kernel, stride, padding, _ = calls.pool_geometry(x.shape, options, n, self.fail)
        if kind == "max":
            return calls.pool_windows(x, n, kernel, stride, padding, -np.inf).max(-1)
        self.reduced = self.reduced or len(kernel) > 1 or kernel[0] > 1
        win = calls.pool_windows(x, n, kernel, stride, padding, 0.0)
        div = calls.pool_divisor(x.shape, n, kernel, stride, padding, options["count_include_pad"])
        return self.sum(np.ascontiguousarray(win)) / np.asarray(div, dtype=self.COMPUTE)

    # ------------------------------------------------------------------ reductions
    def run(self, program: Program):
        self.statistics = statistics.of(program)
        self.centered = {}  # a centering mean's value number -> (axes, shape, M2) of the moment formed at it
        self.var_means = {}  # (id of a var's operand, axes) -> (the operand, the mean its Welford pass formed)
        return super().run(program)

    def reduce(self, node, a):
        axes, n, shape = reduce_axes(node, self._type(a), self.line)
        dtype = self.dtype(a)
        x = to_end(self._operand(a, dtype), axes) if axes else self._operand(a, dtype)[..., None]
        self.reduced = self.reduced or x.shape[-1] > 1
        with np.errstate(all="ignore"):
            z = self.statistic(node, x, dtype, axes)
            if z is None:
                z = self.var_mean(node, a, x, dtype, axes)
            if z is None:
                z = self.reduction(node.op, x, node.correction)
        kept = tuple(1 if i in axes else s for i, s in enumerate(a.shape)) if node.keepdim else shape
        return self.round(np.asarray(z).reshape(kept), dtype)

    def var_mean(self, node, a, x: np.ndarray, dtype: str, axes) -> np.ndarray | None:
        """torch.var_mean as a lifted joint graph writes it: a `var`, then a `mean` of the very same tensor over the
        same dims. ATen's moments and Inductor's Welford reduction form both in one pass, and a backward reads
        that mean, so a Welford witness takes the mean from the var's pass; None otherwise (reduce as written)."""
        if self.acc.moments != "welford" or dtype != "float32":
            return None
        key = (id(a), tuple(axes))
        if node.op == "var":
            self.took_moments = True
            mean, m2 = self.moments(x, True)
            self.var_means[key] = (a, mean)  # the operand kept: its id is not reused while the walk runs
            return m2 / x.dtype.type(x.shape[-1] - (1 if node.correction is None else node.correction))
        kept = self.var_means.get(key)
        if node.op == "mean" and kept is not None and kept[0] is a:
            return kept[1]
        return None

    def reduction(self, op: str, x: np.ndarray, correction):
        """sum / mean / var over the last axis of x (compute dtype)."""
        f = x.dtype.type
        if op == "sum":
            return self.sum(x)
        if op == "mean":
            return self.sum(x) / self.count(f(x.shape[-1]))
        self.took_moments = True
        _, m2 = self.moments(x, True)
        return m2 / f(x.shape[-1] - (1 if correction is None else correction))

    def statistic(self, node, x: np.ndarray, dtype: str, axes) -> np.ndarray | None:
        """A written-out moment's reduction (harness.program.statistics) formed by the Welford order, as the
        program's `var` is; None to reduce as written (two-pass orders, a statistic not in float32, a
        moment whose centering mean this walk has not formed)."""
        moment, center = self.statistics.second(node), self.statistics.mean(node)
        if moment is None and center is None:
            return None
        if dtype != "float32":  # a float32 Welford is no way to run a float16 statistic: as written, every order
            return None
        self.took_moments = True  # the Welford witnesses differ from two-pass here
        if self.acc.moments != "welford":
            return None
        if center is not None:  # T's mean; its M2 waits for the moment's reduction of squares
            mean, m2 = self.moments(x, True)
            self.centered[center] = (axes, x.shape, m2)
            return mean
        if not moment.centered:  # a mean of squares, as a running mean (F.rms_norm's Welford witness)
            return moments(x, True, self.acc)[0]
        formed = self.centered.get(moment.mean)
        if formed is None or formed[:2] != (axes, x.shape):
            return None
        m2 = formed[2]
        return m2 / x.dtype.type(x.shape[-1]) if node.op == "mean" else m2

    def sum(self, x):
        return row_sum(x, self.acc)

    def count(self, n):
        """The element count a mean divides by (exact in the compute dtype)."""
        return n

    def moments(self, x, centered: bool):
        return moments(x, centered, self.acc)

    # ------------------------------------------------------------------------ F.* norms
    def norm(self, node, a, normalized_shape, groups, weight, bias, eps):
        types = [None if p is None else self._type(p) for p in (weight, bias)]
        info = norm_info(node, self._type(a), normalized_shape, groups, *types, eps, self.line)
        eps = torch_norm_eps(node.kind, eps)
        dtype, shape, rank = self.dtype(a), a.shape, a.ndim
        x = np.asarray(a).astype(self.COMPUTE)
        if node.kind == "group_norm":
            x = x.reshape(shape[0], info.groups, -1)
        else:
            x = to_end(x, info.axes)
        self.took_moments = True
        self.reduced = self.reduced or x.shape[-1] > 1
        with np.errstate(all="ignore"):
            y = self.normalized(x, node.kind != "rms_norm", float(eps)).reshape(shape)
            pshape = (shape[rank - len(normalized_shape):] if node.kind != "group_norm"
                      else (shape[1],) + (1,) * (rank - 2))
            y = self.affine(y, weight, bias, pshape)
        return self.round(y, dtype)

    def normalized(self, x, centered: bool, eps: float):
        """(x - mean)·rstd over the last axis of x (compute dtype), statistics by `acc`."""
        mean, stat = self.moments(x, centered)
        var = stat / x.dtype.type(x.shape[-1]) if centered else stat
        rstd = self.rsqrt(var + self.COMPUTE(eps))
        return (x - mean[..., None]) * rstd[..., None]

    def affine(self, y, weight, bias, pshape):
        if weight is not None:
            y = y * np.asarray(weight).astype(self.COMPUTE).reshape(pshape)
        if bias is not None:
            y = y + np.asarray(bias).astype(self.COMPUTE).reshape(pshape)
        return y


# ------------------------------------------------------------------------------------- running
def environment(program: Program, case: ProgramCase, arrays: dict) -> dict:
    """The walker's environment: the rounded inputs and parameters (their `ones` values where `arrays` lacks
    one, as the program module's)."""
    env = {"eps": case.eps}
    for name in case.inputs:
        if name in arrays:
            env[name] = np.asarray(arrays[name]).astype(np_dtype(case.input_type(name)[1]))
    for name in program.params:
        dtype = np_dtype(case.weight_dtype)
        env[name] = (np.asarray(arrays[name]).astype(dtype) if name in arrays
                     else np.full(case.param_shapes[name], ones_value(name), dtype=dtype))
    return env


def run(program: Program, case: ProgramCase, arrays: dict, acc: Accumulation,
        walker: type[NumpyWalker] = NumpyWalker, **options) -> tuple[np.ndarray | tuple, NumpyWalker]:
    """The program's output by one walker (the witness of `acc`, or a subclass), and the walker; a tuple of
    outputs for a program that returns several."""
    w = walker(environment(program, case, arrays), acc, **options)
    out = w.run(program)
    return (tuple(np.asarray(o) for o in out) if isinstance(out, tuple) else np.asarray(out)), w


def outputs(program: Program, case: ProgramCase, arrays: dict) -> tuple[tuple[str, np.ndarray], ...]:
    """(name, output) of each of WITNESSES on the program, skipping those that cannot differ.

    A program that reduces nothing gives the same bits by every order (one
    witness); one without a var, an F.* norm or a written-out moment gives the same by Welford as by
    two-pass (the Welford witnesses are skipped).
    """
    out = []
    first = None
    for acc in WITNESSES:
        if first is not None and not first.reduced:
            break
        if acc.moments == "welford" and first is not None and not first.took_moments:
            continue
        y, w = run(program, case, arrays, acc)
        first = first or w
        out.append((acc.name, y))
    return tuple(out)


