"""A program computed in NumPy by a rendering: the one kernel every program implementation of the benchmark runs.

A `Rendering` says how an implementation computes a program case: the order
its reductions accumulate in (a harness.program.witness_run.Accumulation, the
witnesses' or one they never use), an IR rewrite (harness.benchmark.rewrites)
and the knobs a wrong lowering turns. `RenderWalker` is the program witness
walker with those knobs, so a rendering differs from a correct run of the
program by its one bug class only. The correct renderings are correct by
construction: FP64 rounded once, the program in its own dtypes accumulated
in any float32 order, or a value-preserving rewrite of it.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import ml_dtypes
import numpy as np

from harness.core.dtypes import cast, name_of, np_dtype
from harness.program import evaluate
from harness.core.eps import torch_norm_eps
from harness.program.typecheck import check
from harness.program import calls
from harness.program.ir import BinOp, Cast, Cat, Neg, Program, ProgramCase
from harness.program.walk import is_scalar
from harness.program.accumulate import Accumulation
from harness.program.witness_run import NumpyWalker, environment, to_end
from harness.benchmark import rewrites

PAIRWISE = Accumulation("pairwise two-pass")
_WIDTH = {"float16": 0, "bfloat16": 0, "float32": 1, "float64": 2}


@dataclass(frozen=True)
class Rendering:
    """How one implementation computes a program; the defaults are the program itself, pairwise two-pass."""

    acc: Accumulation = PAIRWISE
    exact: bool = False              # FP64 throughout, rounded once to the output dtype
    ulp_step: int = 0                # the rounded output moved this many ULPs (nextafter)
    rewrite: str | None = None       # a function of harness.benchmark.rewrites applied to the IR first
    norm_eps: str = "inside"         # F.* norms: "outside" is 1/(sqrt(var) + eps)
    drop_cast_back: bool = False     # narrowing casts are no-ops (the float32 value goes on)
    drop_upcast: bool = False        # widening casts are no-ops (the computation stays in the input dtype)
    cast_back_early: bool = False    # a narrowing cast of a binary op moved onto its operands
    stats_in_input: bool = False     # every reduction added left to right in the input dtype
    count_in_input: bool = False     # a mean's element count held in the input dtype
    one_pass: bool = False           # var and the F.* variance as E[x²] - E[x]²
    unbiased: bool = False           # var and the F.* statistics divided by n - 1
    rsqrt_rel_error: float = 0.0     # the relative error of rsqrt and sqrt
    wrong_dims: bool = False         # reductions and F.* statistics over the dim before the normalized one
    centered_through: str | None = None  # F.* norms: x - mean held in this dtype
    flush_subnormals: bool = False   # inputs and output below the smallest normal become 0
    weight_through: str | None = None    # w rounded through this dtype first
    keep_dtype: bool = True          # the output in the program's dtype (False: whatever the bug gives)
    # the ops around a norm (harness.program.calls)
    matmul_in_input: bool = False    # a matmul's products and sums in the input dtype, left to right
    softmax_unshifted: bool = False  # softmax without the max shift, exp, sum and division in the input dtype
    cumsum_in_input: bool = False    # a cumsum's running sum held in the input dtype
    gelu_swapped: bool = False       # gelu's erf and tanh forms swapped
    rotate_sign_swapped: bool = False  # rotate_half's minus on the other half: cat(x2, -x1) for cat(-x2, x1)
    nearest_rounded: bool = False    # nearest interpolation's source index rounded half up, not floored

    def but(self, **changes) -> "Rendering":
        return replace(self, **changes)


def _flush(a: np.ndarray) -> np.ndarray:
    tiny = float(ml_dtypes.finfo(a.dtype).smallest_normal)
    return np.where(np.abs(a.astype(np.float64)) < tiny, np.zeros((), a.dtype), a).astype(a.dtype)


class RenderWalker(NumpyWalker):
    """NumpyWalker with a rendering's knobs (harness.benchmark.renderings.Rendering)."""

    def __init__(self, env, acc, rendering: Rendering, input_dtype: str):
        super().__init__(env, acc)
        self.r = rendering
        self.input_dtype = input_dtype

    # ---------------------------------------------------------------- the ops around a norm
    def _in_input(self, x):
        return x.astype(self._narrow())

    def matmul(self, x, w):
        if not self.r.matmul_in_input:
            return super().matmul(x, w)
        n = self._narrow()
        a2 = self._in_input(x[None, :] if x.ndim == 1 else x)
        b2 = self._in_input(w[:, None] if w.ndim == 1 else w)
        products = (a2[..., :, :, None] * b2[..., None, :, :]).astype(n)
        z = np.add.accumulate(products, axis=-2, dtype=n)[..., -1, :].astype(self.COMPUTE)
        if w.ndim == 1:
            z = z[..., 0]
        if x.ndim == 1:
            z = z[..., 0, :] if w.ndim > 1 else z[..., 0]
        return z

    def softmax(self, x):
        if not self.r.softmax_unshifted:
            return super().softmax(x)
        n = self._narrow()
        e = np.exp(self._in_input(x)).astype(n)
        total = np.add.accumulate(e, axis=-1, dtype=n)[..., -1:]
        return (e / total).astype(n).astype(self.COMPUTE)

    def cumsum(self, x):
        if not self.r.cumsum_in_input:
            return super().cumsum(x)
        return np.add.accumulate(self._in_input(x), axis=-1, dtype=self._narrow()).astype(self.COMPUTE)

    def activation(self, op, x, options):
        if op == "gelu" and self.r.gelu_swapped:
            options = {**options, "approximate": "none" if options["approximate"] == "tanh" else "tanh"}
        return super().activation(op, x, options)

    def call(self, op, arrays, options):
        if op == "interpolate" and self.r.nearest_rounded:
            a = arrays[0]
            out = calls.interpolate_sizes(a.shape, options, self.fail)
            for k, (size, o) in enumerate(zip(a.shape[2:], out)):
                src = np.floor(np.arange(o) * (size / o) + 0.5).astype(np.int64)
                a = np.take(a, np.minimum(src, size - 1), axis=2 + k)
            return np.ascontiguousarray(a)
        return super().call(op, arrays, options)

    # ---------------------------------------------------------------- casts
    def eval(self, node):
        if self.r.rotate_sign_swapped and isinstance(node, Cat) and len(node.tensors) == 2 \
                and isinstance(node.tensors[0], Neg):
            node = replace(node, tensors=(node.tensors[0].operand, Neg(node.tensors[1])))
        if self.r.cast_back_early and isinstance(node, Cast) and isinstance(node.operand, BinOp):
            left, right = self.eval(node.operand.left), self.eval(node.operand.right)
            like = self.eval(node.like) if node.like is not None else None
            dtype = self.target_dtype(node, like)
            inner = [self.dtype(v) for v in (left, right) if not is_scalar(v)]
            if inner and min(_WIDTH[d] for d in inner) > _WIDTH[dtype]:  # narrowing: round the operands first
                left, right = (v if is_scalar(v) else self.round(v, dtype) for v in (left, right))
                return self.binop(node.operand.op, left, right)
            return self.round(self.binop(node.operand.op, left, right), dtype)
        return super().eval(node)

    def cast(self, node, a, dtype, like):
        src = self.dtype(a)
        if self.r.drop_cast_back and _WIDTH[dtype] < _WIDTH[src]:
            return a
        if self.r.drop_upcast and _WIDTH[dtype] > _WIDTH[src]:
            return a
        return self.round(a, dtype)

    # ---------------------------------------------------------------- roots
    def rsqrt(self, x):
        return super().rsqrt(x) * self.COMPUTE(1.0 - self.r.rsqrt_rel_error)

    def sqrt(self, x):
        return super().sqrt(x) * self.COMPUTE(1.0 + self.r.rsqrt_rel_error)

    # ---------------------------------------------------------------- reductions
    def reduce(self, node, a):
        rank = a.ndim
        if self.r.wrong_dims and rank >= 2 and node.dims is not None and \
                tuple(d % rank for d in node.dims) == (rank - 1,):
            node = replace(node, dims=(rank - 2,))
        return super().reduce(node, a)

    def _narrow(self):
        return np_dtype(self.input_dtype)

    def sum(self, x):
        if self.r.stats_in_input:
            return np.add.accumulate(x.astype(self._narrow()), axis=-1, dtype=self._narrow())[..., -1].astype(x.dtype)
        return super().sum(x)

    def count(self, n):
        if self.r.count_in_input:
            return n.dtype.type(cast(np.array(float(n)), self.input_dtype).astype(np.float64))
        return n

    def reduction(self, op, x, correction):
        f = x.dtype.type
        n = f(x.shape[-1])
        if op == rewrites.MEAN_UNBIASED:
            return self.sum(x) / (self.count(n) - f(1))
        if op == "var" and (self.r.unbiased or self.r.one_pass):
            c = 1 if correction is None else correction
            return super().reduction(op, x, 1 if self.r.unbiased and c == 0 else c)
        return super().reduction(op, x, correction)

    def moments(self, x, centered):
        f = x.dtype.type
        n = f(x.shape[-1])
        if self.r.stats_in_input:
            narrow = self._narrow()
            xn = x.astype(narrow)
            count = self.count(n).astype(narrow)
            mean = (self.sum(xn.astype(x.dtype)).astype(narrow) / count).astype(narrow) if centered \
                else np.zeros(x.shape[:-1], narrow)
            d = (xn - mean[..., None]).astype(narrow)
            ss = np.add.accumulate((d * d).astype(narrow), axis=-1, dtype=narrow)[..., -1]
            stat = ss if centered else (ss / count).astype(narrow)
            return mean.astype(x.dtype), stat.astype(x.dtype)
        if self.r.one_pass and centered:
            mean = self.sum(x) / n
            return mean, (self.sum(x * x) / n - mean * mean) * n
        return super().moments(x, centered)

    # ---------------------------------------------------------------- F.* norms
    def norm(self, node, a, normalized_shape, groups, weight, bias, eps):
        if self.r.wrong_dims and node.kind == "group_norm":
            return super().norm(node, a, normalized_shape, a.shape[1], weight, bias, eps)
        if self.r.wrong_dims and a.ndim >= 2 and len(normalized_shape) == 1:
            dtype, shape = self.dtype(a), a.shape
            self.took_moments = self.reduced = True
            x = to_end(np.asarray(a).astype(self.COMPUTE), (a.ndim - 2,))
            e = torch_norm_eps(node.kind, eps)
            with np.errstate(all="ignore"):
                y = self.normalized(x, node.kind != "rms_norm", float(e))
                y = np.moveaxis(y.reshape(shape[:-2] + shape[-1:] + shape[-2:-1]), -1, -2)
                y = self.affine(y, weight, bias, shape[-1:])
            return self.round(y, dtype)
        return super().norm(node, a, normalized_shape, groups, weight, bias, eps)

    def normalized(self, x, centered, eps):
        f = x.dtype.type
        n = f(x.shape[-1])
        mean, stat = self.moments(x, centered)
        var = stat / n if centered else stat
        if self.r.unbiased:
            var = var * (n / (n - f(1)))
        if self.r.norm_eps == "outside":
            rstd = f(1) / (self.sqrt(var) + f(eps))
        else:
            rstd = self.rsqrt(var + f(eps))
        d = x - mean[..., None]
        if self.r.centered_through:
            d = d.astype(np_dtype(self.r.centered_through)).astype(x.dtype)
        return d * rstd[..., None]


def _nextafter(out: np.ndarray, steps: int) -> np.ndarray:
    toward = np.array(np.inf if steps > 0 else -np.inf, dtype=out.dtype)
    for _ in range(abs(steps)):
        out = np.nextafter(out, toward)
    return out


def prepare(program: Program, case: ProgramCase, r: Rendering) -> tuple[Program, int]:
    """The program as the rendering rewrites it, and how many sites the rewrite changed (-1: none asked)."""
    if r.rewrite is None:
        return program, -1
    return getattr(rewrites, r.rewrite)(program)


def render(program: Program, case: ProgramCase, arrays: dict, r: Rendering) -> np.ndarray:
    """The rendering's output for the program on `arrays` (inputs and parameters, the case's dtypes)."""
    out_dtype = check(program, case).dtype
    if r.exact:
        out = cast(evaluate(program, case, arrays, keep_stages=False).out, out_dtype)
        return _nextafter(out, r.ulp_step) if r.ulp_step else out
    rewritten, _ = prepare(program, case, r)
    env = environment(program, case, arrays)
    for name in case.inputs:
        if r.flush_subnormals and name in env:
            env[name] = _flush(env[name])
    if r.weight_through and "w" in env:
        env["w"] = cast(cast(env["w"], r.weight_through), case.weight_dtype)
    walker = RenderWalker(env, r.acc, r, case.dtype)
    with np.errstate(all="ignore"):
        out = np.asarray(walker.run(rewritten))
    if r.keep_dtype and name_of(out.dtype) != out_dtype:
        out = cast(out, out_dtype)
    if r.flush_subnormals:
        out = _flush(out)
    return _nextafter(out, r.ulp_step) if r.ulp_step else out
