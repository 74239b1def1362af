"""torch's shape and dtype rules for the program language, and the static check built on them.

The rules live here once: the check walks a program over types only (before
anything runs, so a bad program is a one-line ProgramError naming its line),
and the FP64 interpreter asks the same functions which dtype torch computes
each value in.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import reduce as fold

from harness.core.dtypes import promote
from harness.program import ops
from harness.program.ir import (
    Norm,
    Program,
    ProgramCase,
    ProgramError,
    Reduce,
    Return,
)
from harness.program.walk import Walker, is_scalar

REDUCED = ("float16", "bfloat16")


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class NormInfo:
    """Where an F.* norm takes its statistics: `axes` (positive), `n` elements per row, `groups`."""
    axes: tuple[int, ...]
    n: int
    groups: int | None = None


def _fail(line, what):
    raise ProgramError(f"program line {line}: {what}")


def result_dtype(*operands) -> str:
    """torch's result dtype for tensors and Python numbers (all floating).

    Dimensioned tensors take priority over 0-dim ones, and tensors over Python
    numbers (a Python float does not promote a float16 tensor; neither does a
    0-dim float32 tensor).
    """
    tensors = [t for t in operands if not is_scalar(t)]
    dimmed = [t.dtype for t in tensors if len(t.shape) > 0]
    pool = dimmed or [t.dtype for t in tensors]
    return fold(promote, pool)


def broadcast(a: tuple, b: tuple, line: int) -> tuple[int, ...]:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        m = a[-i] if i <= len(a) else 1
        n = b[-i] if i <= len(b) else 1
        if m != n and 1 not in (m, n):
            _fail(line, f"shapes {list(a)} and {list(b)} do not broadcast")
        out.append(max(m, n))
    return tuple(reversed(out))


def binary_type(op: str, a, b, line: int) -> TensorType:
    shape_a = () if is_scalar(a) else a.shape
    shape_b = () if is_scalar(b) else b.shape
    return TensorType(broadcast(shape_a, shape_b, line), result_dtype(a, b))


def reduce_axes(node: Reduce, t: TensorType, line: int):
    """(positive axes, elements reduced, result shape) of a mean/sum/var."""
    rank = len(t.shape)
    if node.dims is None:
        axes = tuple(range(rank))
    else:
        axes = []
        for d in node.dims:
            if not -max(rank, 1) <= d < max(rank, 1):
                _fail(line, f"dim {d} is out of range for a tensor of rank {rank} in {node.op}")
            axes.append(d % max(rank, 1))
        if len(set(axes)) != len(axes):
            _fail(line, f"dim {list(node.dims)} repeats a dim in {node.op}")
        axes = tuple(sorted(axes)) if rank else ()
    n = math.prod(t.shape[a] for a in axes)
    if node.keepdim:
        shape = tuple(1 if i in axes else s for i, s in enumerate(t.shape))
    else:
        shape = tuple(s for i, s in enumerate(t.shape) if i not in axes)
    if node.op == "var":
        c = 1 if node.correction is None else node.correction
        if n - c <= 0:
            _fail(line, f"var over {n} element(s) with correction={c} divides by {n - c}")
    return axes, n, shape


def shape_result(op: str, shape: tuple, args: tuple, line: int) -> tuple[int, ...]:
    """The result shape of shape op `op` (the op table's rule), or a ProgramError naming the line."""
    return tuple(ops.get(op).shape_rule(tuple(shape), tuple(args), lambda what: _fail(line, what)))


def cat_type(types, dim: int, line: int) -> tuple[TensorType, int]:
    """torch.cat's rules: one rank (at least 1), equal sizes but along `dim`; floating dtypes promote.
    The result's type and the positive dim."""
    rank = len(types[0].shape)
    if rank == 0 or any(len(t.shape) != rank for t in types):
        _fail(line, f"cat: tensors of ranks {[len(t.shape) for t in types]}; cat needs one rank, at least 1")
    if not -rank <= dim < rank:
        _fail(line, f"dim {dim} is out of range for a tensor of rank {rank} in cat")
    d = dim % rank
    for t in types[1:]:
        if any(a != b for i, (a, b) in enumerate(zip(t.shape, types[0].shape)) if i != d):
            _fail(line, f"cat: shapes {[list(t.shape) for t in types]} differ outside dim {dim}")
    shape = tuple(sum(t.shape[d] for t in types) if i == d else n for i, n in enumerate(types[0].shape))
    return TensorType(shape, fold(promote, [t.dtype for t in types])), d


def linear_type(t, weight, bias, line: int) -> TensorType:
    """F.linear's rules: weight [out, in] with in = the input's last dim, bias [out]; one dtype throughout."""
    for name, p in (("input", t), ("weight", weight)) + ((("bias", bias),) if bias is not None else ()):
        if is_scalar(p):
            _fail(line, f"linear: {name} must be a tensor, got a number")
    if len(weight.shape) != 2 or not t.shape or weight.shape[1] != t.shape[-1]:
        _fail(line, f"linear: weight {list(weight.shape)} does not match the input's last dim of {list(t.shape)}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        _fail(line, f"linear: bias has shape {list(bias.shape)}, expected [{weight.shape[0]}]")
    dtypes = {t.dtype, weight.dtype} | ({bias.dtype} if bias is not None else set())
    if len(dtypes) != 1:
        _fail(line, f"linear: input, weight and bias must share a dtype, got {'/'.join(sorted(dtypes))}")
    return TensorType(tuple(t.shape[:-1]) + (weight.shape[0],), t.dtype)


def call_type(op: str, types, options: dict, line: int) -> TensorType:
    """A call op's result type: the op table's shape rule (harness.program.calls); the dtype is the operands'
    (matmul's two must share it, as torch's kernels require)."""
    fail = lambda what: _fail(line, what)  # noqa: E731
    dtypes = {t.dtype for t in types}
    if len(dtypes) != 1:
        fail(f"{op}: operands must share a dtype, got {'/'.join(sorted(dtypes))}")
    if op == "clamp" and options["min"] is None and options["max"] is None:
        fail("clamp: give at least one of min and max")
    shape = ops.get(op).shape_rule(tuple(tuple(t.shape) for t in types), options, fail)
    return TensorType(tuple(shape), types[0].dtype)


def cast_is_exact(src: str, dst: str) -> bool:
    """Whether every value of `src` is a value of `dst` (no rounding)."""
    return src == dst or dst == "float64" or (dst == "float32" and src in REDUCED)


def norm_info(node: Norm, t, normalized_shape, groups, weight, bias, eps, line: int) -> NormInfo:
    """Check an F.* norm's arguments as torch does; where its statistics are taken."""
    kind = node.kind
    if is_scalar(t):
        _fail(line, f"{kind} needs a tensor input, got a number")
    rank = len(t.shape)
    params = [(n, p) for n, p in (("weight", weight), ("bias", bias)) if p is not None]
    for name, p in params:
        if is_scalar(p):
            _fail(line, f"{kind}: {name} must be a tensor or None, got a number")
    if eps is not None and not is_scalar(eps):
        _fail(line, f"{kind}: eps must be a number")
    if kind == "group_norm":
        if rank < 2:
            _fail(line, f"group_norm needs at least 2 dims, got rank {rank}")
        g, channels = groups, t.shape[1]
        if not isinstance(g, int) or g < 1 or channels % g:
            _fail(line, f"group_norm: num_groups {g} does not divide the {channels} channels")
        want, axes = (channels,), tuple(range(1, rank))
        n = channels // g * math.prod(t.shape[2:])
    else:
        shape = tuple(normalized_shape)
        if any(not isinstance(k, int) or k < 1 for k in shape) or len(shape) > rank \
                or tuple(t.shape[rank - len(shape):]) != shape:
            _fail(line, f"{kind}: normalized_shape {list(shape)} does not match the input's "
                        f"trailing dims of {list(t.shape)}")
        want, axes, g = shape, tuple(range(rank - len(shape), rank)), None
        n = math.prod(shape)
    for name, p in params:
        if tuple(p.shape) != want:
            _fail(line, f"{kind}: {name} has shape {list(p.shape)}, expected {list(want)}")
    if kind != "rms_norm" and params:
        dtypes = {p.dtype for _, p in params}
        if not (dtypes == {t.dtype} or (t.dtype in REDUCED and dtypes == {"float32"})):
            _fail(line, f"{kind}: {t.dtype} input with {'/'.join(sorted(dtypes))} parameters "
                        f"(torch needs the input's dtype, or float32 for a float16/bfloat16 input)")
    return NormInfo(axes, n, g)


class TypeWalker(Walker):
    """Walks a program over TensorTypes: every shape and dtype rule, nothing computed."""

    def _tensor(self, value, what):
        if is_scalar(value):
            self.fail(f"{what} needs a tensor, got a number")
        return value

    def shape(self, t):
        return t.shape

    def dtype(self, t):
        return t.dtype

    def binop(self, op, a, b):
        return binary_type(op, a, b, self.line)

    def neg(self, t):
        return t

    def cast(self, node, t, dtype, like):
        self._tensor(t, f".{node.spelling}()")
        return TensorType(t.shape, dtype)

    def unary(self, op, t):
        self._tensor(t, op)
        return t

    def reduce(self, node, t):
        self._tensor(t, node.op)
        _, _, shape = reduce_axes(node, t, self.line)
        return TensorType(shape, t.dtype)

    def norm(self, node, t, normalized_shape, groups, weight, bias, eps):
        norm_info(node, t, normalized_shape, groups, weight, bias, eps, self.line)
        return TensorType(t.shape, t.dtype)

    def shape_op(self, op, t, args):
        return TensorType(shape_result(op, t.shape, args, self.line), t.dtype)

    def cat(self, ts, dim):
        return cat_type(ts, dim, self.line)[0]

    def linear(self, t, weight, bias):
        return linear_type(t, weight, bias, self.line)

    def call(self, op, ts, options):
        return call_type(op, ts, options, self.line)

    def statement_done(self, stmt, value):
        if isinstance(stmt, Return) and any(is_scalar(v) for v in (value if isinstance(value, tuple) else (value,))):
            self.fail("the return value is a number, not a tensor")


def type_env(program: Program, case: ProgramCase) -> dict:
    """The names a program may read, as types (and eps as its number)."""
    env = {"eps": case.eps}
    for name in case.inputs:
        env[name] = TensorType(*case.input_type(name))
    for name in case.params:
        env[name] = TensorType(tuple(case.param_shapes[name]), case.weight_dtype)
    return env


def check(program: Program, case: ProgramCase) -> TensorType | tuple[TensorType, ...]:
    """Raise a ProgramError naming the line if `program` is ill-typed for `case`; the output's type (a tuple of
    them for a program returning several outputs)."""
    missing = [n for n in program.extra_inputs if n not in case.extra_inputs]
    if missing:
        raise ProgramError(f"program: reads {missing[0]!r} but the case has no extra input {missing[0]!r}")
    return TypeWalker(type_env(program, case)).run(program)
