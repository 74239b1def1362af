"""Witnesses for any program: the IR run in NumPy, in the program's own dtypes, as correct implementations run it.

The comparator holds a compiled path to what correct implementations achieve
on a case's very rows (README, "What a correct float32 implementation
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
  Tensor methods do;
* a reduction accumulates in float32 and rounds once to its dtype (mean:
  the float32 sum divided by n, as ATen's mean does for every dtype);
  F.linear is, per output, a float32 sum of the float32 products;
* F.layer_norm / F.rms_norm / F.group_norm keep their statistics and the
  normalized value in float32 and round once to the output dtype (ATen's
  CPU kernels: RowwiseMoments, then (x - mean)·rstd·w + b in opmath).

Only the order in which a reduction adds its terms is left open, and each
witness fixes one order (`Accumulation`):

* sequential: each sum added left to right (a scalar loop: TVM's lowering of
  every reduction, ATen's for short outer reductions);
* pairwise: NumPy's pairwise summation (a tree, like eager's cascade sum);
* blocked: BLOCKS contiguous blocks, each sequential, then the partial sums
  in order (a parallel reduction over threads or tiles);

and, where the program asks for a variance (`var`) or an F.* norm, how the
moments are formed: two-pass (the mean, then the squared deviations from it)
or Welford (one element at a time; blocked: Welford per block, combined by
Chan et al.'s update), as Inductor's and ATen's running statistics do; for
rms_norm the moment is the mean of squares, kept as a running mean.

Each is a legitimate implementation of the program: IEEE arithmetic in the
very dtypes torch's rules give each op, rounding where the program rounds,
and a float32 accumulation in an order some real kernel uses. None is more
accurate than a correct compiled kernel may be; none is less accurate than
one is entitled to be, since every order here is one a shipped compiler or
library emits. tests/program/test_witness.py checks them against eager
where torch's order is known.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.core.dtypes import name_of, np_dtype
from harness.program import ops
from harness.program.check import (
    RMS_DEFAULT_EPS,
    TensorType,
    binary_type,
    linear_type,
    norm_info,
    reduce_axes,
    shape_result,
)
from harness.program.ir import Program, ProgramCase, ones_value
from harness.program.walk import Walker, is_scalar

DEFAULT_EPS = 1e-5  # F.layer_norm / F.group_norm
BLOCKS = 4          # the blocked order's contiguous blocks (a 4-thread parallel reduction)
LANES = 8           # a SIMD kernel's interleaved partial sums (a held-out order: only renderings use it)
SUMS = ("sequential", "pairwise", "blocked", "lanes")
MOMENTS = ("two_pass", "welford")


@dataclass(frozen=True)
class Accumulation:
    """One order of accumulation: how sums are added, and how a variance's moments are formed."""

    name: str
    sums: str = "pairwise"      # one of SUMS
    moments: str = "two_pass"   # one of MOMENTS (only var and the F.* norms take moments)
    blocks: int = BLOCKS

    def __post_init__(self):
        if self.sums not in SUMS or self.moments not in MOMENTS:
            raise ValueError(f"Accumulation {self.name!r}: sums {self.sums!r}, moments {self.moments!r}")


WITNESSES = (
    Accumulation("sequential two-pass", "sequential", "two_pass"),
    Accumulation("sequential Welford", "sequential", "welford"),
    Accumulation("pairwise two-pass", "pairwise", "two_pass"),
    Accumulation("blocked two-pass", "blocked", "two_pass"),
    Accumulation("blocked Welford", "blocked", "welford"),
)

F32 = np.float32


# ------------------------------------------------------------------ float32 sums over the last axis
def _sequential(a: np.ndarray) -> np.ndarray:
    return np.add.accumulate(a, axis=-1, dtype=a.dtype)[..., -1]


def _pairwise(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).sum(-1, dtype=a.dtype)


def _chunks(a: np.ndarray, blocks: int) -> list[np.ndarray]:
    return [c for c in np.array_split(a, min(blocks, a.shape[-1]), axis=-1) if c.shape[-1]]


def _blocked(a: np.ndarray, blocks: int) -> np.ndarray:
    return _sequential(np.stack([_sequential(c) for c in _chunks(a, blocks)], axis=-1))


def _lanes(a: np.ndarray) -> np.ndarray:
    n = a.shape[-1]
    padded = np.zeros(a.shape[:-1] + (-(-n // LANES) * LANES,), a.dtype)
    padded[..., :n] = a
    lanes = np.add.accumulate(padded.reshape(a.shape[:-1] + (-1, LANES)), axis=-2, dtype=a.dtype)[..., -1, :]
    return _sequential(lanes)


def row_sum(a: np.ndarray, acc: Accumulation) -> np.ndarray:
    """The sum over the last axis of `a`, in a's dtype, in the order `acc` says."""
    if acc.sums == "sequential":
        return _sequential(a)
    if acc.sums == "blocked":
        return _blocked(a, acc.blocks)
    if acc.sums == "lanes":
        return _lanes(a)
    return _pairwise(a)


# --------------------------------------------------------------------------- moments over the last axis
def _welford(a: np.ndarray, centered: bool, lengths: np.ndarray | None = None):
    """(count, mean, M2) over the last axis, one element at a time; for centered=False the running mean of
    squares (M2 unused). `lengths` (broadcast over a.shape[:-1]) stops a row's updates after its own
    length, so blocks of unequal length are walked side by side."""
    f = a.dtype.type
    mean = np.zeros(a.shape[:-1], a.dtype)
    m2 = np.zeros(a.shape[:-1], a.dtype)
    for k in range(a.shape[-1]):
        v = a[..., k] if centered else a[..., k] * a[..., k]
        delta = v - mean
        new_mean = mean + delta / f(k + 1)
        new_m2 = m2 + delta * (v - new_mean) if centered else m2
        if lengths is not None:
            live = k < lengths
            new_mean, new_m2 = np.where(live, new_mean, mean), np.where(live, new_m2, m2)
        mean, m2 = new_mean, new_m2
    count = f(a.shape[-1]) if lengths is None else np.broadcast_to(lengths, mean.shape).astype(a.dtype)
    return count, mean, m2


def _chan(count, mean, m2):
    """Chan et al.'s combination, in order, of partial moments along the last axis of (count, mean, M2)."""
    c, mu, s = count[..., 0], mean[..., 0], m2[..., 0]
    for j in range(1, mean.shape[-1]):
        k, bm, bm2 = count[..., j], mean[..., j], m2[..., j]
        total = c + k
        delta = bm - mu
        mu = mu + delta * (k / total)
        s = s + bm2 + delta * delta * (c * k / total)
        c = total
    return c, mu, s


def _grouped(a: np.ndarray, centered: bool, groups: str, blocks: int):
    """Welford per group (BLOCKS contiguous blocks, or LANES interleaved lanes) walked side by side, then Chan."""
    n = a.shape[-1]
    if groups == "lanes":
        g = min(LANES, n)
        length = -(-n // g)
        padded = np.zeros(a.shape[:-1] + (length * g,), a.dtype)
        padded[..., :n] = a
        parts = np.swapaxes(padded.reshape(a.shape[:-1] + (length, g)), -1, -2)  # (..., lane, k)
        lengths = np.array([len(range(lane, n, g)) for lane in range(g)])
    else:
        chunks = _chunks(a, blocks)
        length = max(c.shape[-1] for c in chunks)
        parts = np.stack([np.pad(c, [(0, 0)] * (a.ndim - 1) + [(0, length - c.shape[-1])]) for c in chunks], -2)
        lengths = np.array([c.shape[-1] for c in chunks])
    count, mean, m2 = _welford(parts, centered, lengths)
    return _chan(count, mean, m2)


def moments(a: np.ndarray, centered: bool, acc: Accumulation) -> tuple[np.ndarray, np.ndarray]:
    """(mean, M2 = the sum of squared deviations) over the last axis, in a's dtype, by `acc`;
    for centered=False (rms_norm) (0, the mean of squares)."""
    f = a.dtype.type
    n = f(a.shape[-1])
    if acc.moments == "welford":
        if acc.sums in ("blocked", "lanes"):
            _, mean, m2 = _grouped(a, centered, acc.sums, acc.blocks)
        else:
            _, mean, m2 = _welford(a, centered)
        # uncentered: the running mean of squares is the statistic (the combinations' M2 is unused)
        return (mean, m2) if centered else (np.zeros_like(mean), mean)
    if not centered:
        return np.zeros(a.shape[:-1], a.dtype), row_sum(a * a, acc) / n
    mean = row_sum(a, acc) / n
    d = a - mean[..., None]
    return mean, row_sum(d * d, acc)


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

    COMPUTE = F32  # opmath: float16/bfloat16/float32 ops are computed in float32

    def __init__(self, env: dict, acc: Accumulation):
        super().__init__(env)
        self.acc = acc
        self.took_moments = False  # a var or an F.* norm ran (the Welford witnesses differ from two-pass)
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

    # ------------------------------------------------------------------ reductions
    def reduce(self, node, a):
        axes, n, shape = reduce_axes(node, self._type(a), self.line)
        dtype = self.dtype(a)
        x = to_end(self._operand(a, dtype), axes) if axes else self._operand(a, dtype)[..., None]
        self.reduced = self.reduced or x.shape[-1] > 1
        with np.errstate(all="ignore"):
            z = self.reduction(node.op, x, node.correction)
        kept = tuple(1 if i in axes else s for i, s in enumerate(a.shape)) if node.keepdim else shape
        return self.round(np.asarray(z).reshape(kept), dtype)

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
        if eps is None:
            eps = RMS_DEFAULT_EPS if node.kind == "rms_norm" else DEFAULT_EPS
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
        walker: type[NumpyWalker] = NumpyWalker, **options) -> tuple[np.ndarray, NumpyWalker]:
    """The program's output by one walker (the witness of `acc`, or a subclass), and the walker."""
    w = walker(environment(program, case, arrays), acc, **options)
    return np.asarray(w.run(program)), w


def outputs(program: Program, case: ProgramCase, arrays: dict) -> tuple[tuple[str, np.ndarray], ...]:
    """(name, output) of each of WITNESSES on the program, skipping those that cannot differ.

    A program that reduces nothing gives the same bits by every order (one
    witness); one without a var or an F.* norm gives the same by Welford as by
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


