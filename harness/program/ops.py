"""The op table of the program language (docs/contracts.md §7): one entry per op, read by every part of the language.

An entry holds everything normdiff knows of an op: how source spells it (the
parser's whitelist), the torch callable the program module calls, its NumPy
form (values in any float dtype: the FP64 reference and the witnesses), its
error-bound rule (bounds.py), whether its result is rounded at all, the ATen
overloads that compute it (the lifter reads an exported graph through them),
the names compiled graphs give it (attribution's pairing rule) and the NumPy
text of the repro script's stage code. The parser, the type check, the torch
module, the interpreter, the stage code, the matcher and the lifter all read
this table, so adding an elementwise op is one `_unary(...)` line here.

Numpy and the bound rules only: importing the table (the spec does, to
parse every program) imports no torch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from harness.program import bounds, calls


@dataclass(frozen=True)
class Op:
    """One op of the language."""

    name: str                       # the IR's name, and the canonical op of attribution
    kind: str                       # unary binary reduce norm cast shape cat linear call
    value: Callable | None = None   # NumPy form: arrays (any float dtype) -> array
    bound: Callable | None = None   # (value, err, ...) -> (FP64 value, propagated err), bounds.py
    torch: str | None = None        # the torch callable of the program module ("torch.rsqrt"); a call op's takes
                                    # its operands, then its options as keywords
    functions: tuple[str, ...] = ()  # torch.NAME / F.NAME spellings (without the prefix)
    method: bool = False            # t.NAME(...) spells it too
    exact: bool = False             # its result is not rounded (abs, shape ops)
    aten: tuple[str, ...] = ()      # ATen ops (packet names) that compute it
    compiled: tuple[str, ...] = ()  # other names compiled graphs give it (Relax, ONNX, OpenVINO's op types, ...)
    # NumPy expression of the repro stage code: a template ("{a}" the operand; a call's "{b}" its second and its
    # options by name), or for a call op whose text is computed, text(names, shapes, options) (calls.py)
    text: str | Callable = ""
    op_class: str = "elementwise"   # elementwise reduce norm cast layout (attribution's pairing classes)
    shape_rule: Callable | None = None  # shape ops: (shape, args, fail) -> result shape
    apply: Callable | None = None   # shape ops: (array, args) -> array (values and bounds alike)
    signature: tuple[str, ...] = ()  # norms, linear: parameter names in torch's order; calls: the operands
    extra: dict = field(default_factory=dict)
    options: tuple = ()             # calls: their Options, in torch's positional order after the operands
    rows: str = "keep"              # calls: the rows of their result (keep: the operand's; along: a new
                                    # statistic along `dim`; none: the last dim's)


@dataclass(frozen=True)
class Option:
    """A keyword of a call op: its kind (dim int ints number numbers choice bool) and default.

    dim: an int literal; ints: an int or a tuple of them (None where the default is None); number(s): an
    int or float literal (or a tuple); choice: one of `choices` (a string or a bool literal)."""

    name: str
    kind: str
    default: object = None
    required: bool = False
    choices: tuple = ()


def _sigmoid(a):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-a))


def _silu(a):
    return a * _sigmoid(a)


def _sigmoid_slope(lo, hi):
    """max σ'(t) over [lo, hi]: σ' peaks at 0 (0.25) and falls off symmetrically."""
    nearest = np.where((lo <= 0) & (hi >= 0), 0.0, np.minimum(np.abs(lo), np.abs(hi)))
    s = _sigmoid(nearest)
    return s * (1.0 - s)


# max |silu'(t)| over the reals: silu'(t) = σ(t)(1 + t(1 − σ(t))), whose extrema are 1.0998 (t ≈ 2.40)
# and −0.0998 (t ≈ −2.40); the bound uses the global maximum, valid on every interval.
SILU_SLOPE = 1.0999


def _silu_slope(lo, hi):
    return np.full(np.shape(lo), SILU_SLOPE)


def _unary(name, value, bound, *, text, torch=None, functions=None, method=True, exact=False, aten=None,
           compiled=()) -> Op:
    return Op(name, "unary", value, bound, torch or f"torch.{name}", (name,) if functions is None else functions,
              method, exact, aten or (name,), compiled, text)


def _binary(name, value, bound, operator, aten, compiled=()) -> Op:
    return Op(name, "binary", value, bound, None, (), False, False, aten, compiled, "{a} " + operator + " {b}",
              extra={"operator": operator})


# -- shape ops: exact, so values and bounds go through the same NumPy call ----------------------------
def _unsqueeze_shape(shape, args, fail):
    (d,) = args
    rank = len(shape) + 1
    if not -rank <= d < rank:
        fail(f"dim {d} is out of range for unsqueeze of a tensor of rank {len(shape)}")
    d %= rank
    return shape[:d] + (1,) + shape[d:]


def _squeeze_dims(shape, args, fail):
    if not args:
        return tuple(i for i, n in enumerate(shape) if n == 1)
    return tuple(i for i in {calls.axis(d, len(shape), fail, "squeeze") for d in args} if shape[i] == 1)


def _squeeze_shape(shape, args, fail):
    drop = _squeeze_dims(shape, args, fail)
    return tuple(n for i, n in enumerate(shape) if i not in drop)


def _reshape_shape(shape, args, fail):
    size = math.prod(shape)
    if sum(1 for a in args if a == -1) > 1:
        fail("only one dimension can be -1 in view/reshape")
    if any(a < -1 or a == 0 for a in args):
        fail(f"invalid shape {list(args)} in view/reshape")
    known = math.prod(a for a in args if a != -1)
    if -1 in args:
        if known == 0 or size % known:
            fail(f"shape {list(args)} is invalid for {size} elements")
        args = tuple(size // known if a == -1 else a for a in args)
    if math.prod(args) != size:
        fail(f"shape {list(args)} is invalid for {size} elements")
    return tuple(args)


def _expand_shape(shape, args, fail):
    if len(args) < len(shape):
        fail(f"expand to {list(args)} has fewer dims than the tensor's {list(shape)}")
    lead = len(args) - len(shape)
    out = []
    for i, a in enumerate(args):
        have = shape[i - lead] if i >= lead else None
        if a == -1:
            if have is None:
                fail("expand: -1 is not allowed for a new leading dim")
            out.append(have)
        elif have is not None and have != a and have != 1:
            fail(f"expand: dim {i} of size {have} cannot become {a}")
        else:
            out.append(a)
    return tuple(out)


def _permute_shape(shape, args, fail):
    dims = [calls.axis(d, len(shape), fail, "permute") for d in args]
    if len(dims) != len(shape) or sorted(dims) != list(range(len(shape))):
        fail(f"permute {list(args)} is not a permutation of the {len(shape)} dims")
    return tuple(shape[d] for d in dims)


def _transpose_shape(shape, args, fail):
    a, b = (calls.axis(d, len(shape), fail, "transpose") for d in args)
    out = list(shape)
    out[a], out[b] = out[b], out[a]
    return tuple(out)


def _narrow_shape(shape, args, fail):
    dim, start, length = args
    d = calls.axis(dim, len(shape), fail, "narrow")
    if start < 0:
        start += shape[d]
    if not (0 <= start and length >= 0 and start + length <= shape[d]):
        fail(f"narrow({dim}, {args[1]}, {length}) is out of range for size {shape[d]}")
    return shape[:d] + (length,) + shape[d + 1:]


def _is_slice(item) -> bool:
    """An index item `lower:upper` (resolved by the walker to ("slice", lower, upper), ints or None)."""
    return isinstance(item, tuple)


def _index_shape(shape, items, fail):
    """t[...] with `:`, `lower:upper`, `None` and one `...`: new dims where None stands, slices as Python's."""
    if items.count("...") > 1:
        fail("an index may hold one '...'")
    taken = sum(1 for i in items if i == ":" or _is_slice(i))
    if taken > len(shape):
        fail(f"too many indices for a tensor of rank {len(shape)}")
    out, k = [], 0
    for item in items:
        if item == "None":
            out.append(1)
        elif item == ":":
            out.append(shape[k])
            k += 1
        elif _is_slice(item):
            out.append(len(range(*slice(item[1], item[2]).indices(shape[k]))))
            k += 1
        else:
            rest = len(shape) - taken
            out.extend(shape[k:k + rest])
            k += rest
    return tuple(out) + tuple(shape[k:])


def index_key(items):
    """The Python index of resolved index items (NumPy and torch read it alike)."""
    return tuple(slice(i[1], i[2]) if _is_slice(i) else None if i == "None" else Ellipsis if i == "..."
                 else slice(None) for i in items)


def _index_apply(a, items):
    return a[index_key(items)]


def _narrow_apply(a, args):
    dim, start, length = args
    d = dim % a.ndim
    start = start + a.shape[d] if start < 0 else start
    return np.take(a, np.arange(start, start + length), axis=d)


def _shape(name, rule, apply, *, aten, functions=(), text, method=True) -> Op:
    return Op(name, "shape", None, None, None, functions, method, True, aten, (), text, "layout", rule, apply)


def _views_shape(shape, args, fail):
    return _reshape_shape(shape, args, fail)


TABLE: tuple[Op, ...] = (
    # elementwise, one operand
    _unary("rsqrt", lambda a: 1.0 / np.sqrt(a), bounds.rsqrt, text="1.0 / np.sqrt({a})"),
    _unary("sqrt", np.sqrt, bounds.sqrt, text="np.sqrt({a})", compiled=("Sqrt",)),
    _unary("abs", np.abs, None, text="np.abs({a})", exact=True, compiled=("absolute", "Abs")),
    _unary("square", np.square, bounds.square, text="{a} * {a}"),
    _unary("reciprocal", np.reciprocal, bounds.reciprocal, text="1.0 / {a}"),
    _unary("silu", _silu, bounds.by_slope(_silu, _silu_slope), text="{a} / (1.0 + np.exp(-{a}))",
           torch="torch.nn.functional.silu", functions=("nn.functional.silu",), method=False,
           compiled=("swish", "Swish")),
    _unary("sigmoid", _sigmoid, bounds.by_slope(_sigmoid, _sigmoid_slope), text="1.0 / (1.0 + np.exp(-{a}))",
           compiled=("Sigmoid",)),
    # max(a, 0) is exact and 1-Lipschitz: the operand's bound carries over unchanged
    _unary("relu", lambda a: np.maximum(a, 0.0), None, text="np.maximum({a}, 0.0)", exact=True,
           compiled=("Relu",)),
    # elementwise, two operands (operators: `**` is also .pow(K) and torch.pow)
    _binary("add", np.add, bounds.add, "+", ("add",), ("Add",)),
    _binary("sub", np.subtract, lambda a, ea, b, eb: bounds.add(a, ea, b, eb, -1.0), "-", ("sub", "rsub"),
            ("subtract", "Subtract")),
    _binary("mul", np.multiply, bounds.mul, "*", ("mul",), ("multiply", "Multiply")),
    _binary("div", np.divide, bounds.div, "/", ("div",), ("divide", "Divide")),
    _binary("pow", np.power, None, "**", ("pow",), ("power", "Power", "SquaredDifference")),
    Op("neg", "neg", np.negative, None, None, (), False, True, ("neg",), ("negative", "Negative"), "-{a}"),
    # reductions (dims, keepdim; var: correction)
    Op("mean", "reduce", np.mean, None, None, ("mean",), True, aten=("mean",), compiled=("ReduceMean",), text="mean",
       op_class="reduce"),
    Op("sum", "reduce", np.sum, None, None, ("sum",), True, aten=("sum",), compiled=("ReduceSum",), text="sum",
       op_class="reduce"),
    Op("var", "reduce", np.var, None, None, ("var",), True, aten=("var",), compiled=("variance", "var_mean"),
       text="var", op_class="reduce"),
    # F.* norms (statistics in float32 on CPU); OpenVINO's MVN is a layer norm without its affine, its RMS an
    # RMSNorm with its weight
    Op("layer_norm", "norm", functions=("nn.functional.layer_norm",), aten=("layer_norm", "native_layer_norm"),
       compiled=("MVN",), op_class="norm", signature=("input", "normalized_shape", "weight", "bias", "eps")),
    Op("rms_norm", "norm", functions=("nn.functional.rms_norm",), aten=("rms_norm", "_fused_rms_norm"),
       compiled=("RMS",), op_class="norm", signature=("input", "normalized_shape", "weight", "eps")),
    Op("group_norm", "norm", functions=("nn.functional.group_norm",), aten=("group_norm", "native_group_norm"),
       compiled=("GroupNormalization",), op_class="norm", signature=("input", "num_groups", "weight", "bias", "eps")),
    # x @ W.T + b: a float32-accumulated dot product per output element
    Op("linear", "linear", functions=("nn.functional.linear",), aten=("linear", "addmm", "mm", "matmul"),
       compiled=("matmul", "dense", "MatMul"), op_class="reduce", signature=("input", "weight", "bias")),
    # dtype conversions (exact where the target holds every value of the source)
    Op("cast", "cast", aten=("_to_copy", "to", "type_as", "_to_dim_order_copy"),
       compiled=("astype", "convert_element_type", "Convert"), op_class="cast", text="{a}.copy()"),
    # shape ops: exact, not computations (attribution's pairing drops them)
    _shape("unsqueeze", _unsqueeze_shape, lambda a, args: np.expand_dims(a, args[0]), aten=("unsqueeze",),
           functions=("unsqueeze",), text="{a}.reshape({shape})"),
    _shape("squeeze", _squeeze_shape, lambda a, args: a.reshape(_squeeze_shape(a.shape, args, None)),
           aten=("squeeze",), functions=("squeeze",), text="{a}.reshape({shape})"),
    _shape("view", _views_shape, lambda a, args: a.reshape(_reshape_shape(a.shape, args, None)),
           aten=("view", "_unsafe_view"), text="{a}.reshape({shape})"),
    _shape("reshape", _views_shape, lambda a, args: a.reshape(_reshape_shape(a.shape, args, None)),
           aten=("reshape", "flatten", "unflatten"), functions=("reshape",), text="{a}.reshape({shape})"),
    _shape("expand", _expand_shape, lambda a, args: np.broadcast_to(a, _expand_shape(a.shape, args, None)),
           aten=("expand", "broadcast_to", "expand_as"), text="np.broadcast_to({a}, {shape})"),
    _shape("permute", _permute_shape, lambda a, args: np.transpose(a, [d % a.ndim for d in args]),
           aten=("permute",), functions=("permute",), text="np.transpose({a}, {dims})"),
    _shape("transpose", _transpose_shape, lambda a, args: np.swapaxes(a, *args), aten=("transpose", "t"),
           functions=("transpose",), text="np.swapaxes({a}, {args[0]}, {args[1]})"),
    _shape("contiguous", lambda shape, args, fail: tuple(shape), lambda a, args: a,
           aten=("contiguous", "clone", "alias", "detach", "lift_fresh_copy", "_clone_dim_order", "copy"),
           text="{a}"),
    _shape("narrow", _narrow_shape, _narrow_apply, aten=("narrow", "slice", "split", "chunk", "split_with_sizes"),
           functions=("narrow",), text="np.take({a}, np.arange({start}, {stop}), axis={dim})"),
    _shape("index", _index_shape, _index_apply, aten=(), method=False, text="{a}[{items}]"),
    # torch.cat([a, b, ...], dim): exact (operands promote to one float dtype, a widening), so each element keeps
    # its operand's value and bound; layout, not a computation
    Op("cat", "cat", None, None, "torch.cat", ("cat",), False, True, ("cat", "concat", "concatenate"), ("concat",),
       "np.concatenate([{items}], axis={dim})", "layout",
       apply=lambda arrays, dim: np.concatenate(arrays, axis=dim)),
)



def _call(name, shape_rule, bound, *, operands=("input",), options=(), functions=(), method=False, exact=False,
          aten=(), compiled=(), text="", op_class="elementwise", rows="keep", value=None, extra=None,
          torch=None) -> Op:
    return Op(name, "call", value, bound, torch, functions, method, exact, aten or (name,), compiled, text, op_class,
              shape_rule, None, operands, extra or {}, options, rows)


_DIM = (Option("dim", "dim", required=True),)


def _pool(kind: str, n: int) -> Op:
    common = (Option("kernel_size", "ints", required=True), Option("stride", "ints", None),
              Option("padding", "ints", 0))
    if kind == "avg":
        options = common + (Option("ceil_mode", "choice", False, choices=(False,)),
                            Option("count_include_pad", "bool", True))
        bound, op_class, exact, aten = calls.avg_pool_bound(n), "reduce", False, (f"avg_pool{n}d",)
    else:
        options = common + (Option("dilation", "choice", 1, choices=(1,)),
                            Option("ceil_mode", "choice", False, choices=(False,)),
                            Option("return_indices", "choice", False, choices=(False,)))
        bound, op_class, exact = calls.max_pool_bound(n), "reduce", True
        aten = (f"max_pool{n}d", f"max_pool{n}d_with_indices")
    return _call(f"{kind}_pool{n}d", calls.pool_shape(n), bound, options=options, text=calls.pool_text(kind, n),
                 torch=f"torch.nn.functional.{kind}_pool{n}d",
                 functions=(f"nn.functional.{kind}_pool{n}d",), exact=exact, aten=aten, op_class=op_class,
                 rows="none", extra={"spatial": n, "pool": kind})


CALLS: tuple[Op, ...] = (
    # a @ b: a float32-accumulated dot product of length K per output, as linear's
    _call("matmul", calls.matmul_shape, calls.matmul_bound, operands=("input", "other"), functions=("matmul",),
          method=True, aten=("matmul", "mm", "bmm"), op_class="reduce", rows="none", extra={"operator": "@"},
          torch="operator.matmul",
          text="np.matmul({a}, {b})"),
    _call("softmax", calls.along_shape, calls.softmax_bound, options=_DIM,
          functions=("softmax", "nn.functional.softmax"), method=True, aten=("softmax", "_softmax", "_safe_softmax"),
          op_class="reduce", rows="along", value=calls.softmax, torch="torch.nn.functional.softmax",
          text="(lambda e: e / e.sum(axis={dim}, keepdims=True))(np.exp({a} - {a}.max(axis={dim}, keepdims=True)))"),
    _call("cumsum", lambda s, o, f: calls.along_shape(s, o, f, "cumsum"), calls.cumsum_bound, options=_DIM,
          functions=("cumsum",), method=True, op_class="reduce", rows="along", text="np.cumsum({a}, axis={dim})",
          torch="torch.cumsum"),
    _call("gelu", calls.same_shape, calls.gelu_bound(),
          options=(Option("approximate", "choice", "none", choices=("none", "tanh")),),
          functions=("nn.functional.gelu",), value=calls.gelu, text=calls.gelu_text, torch="torch.nn.functional.gelu"),
    _call("elu", calls.same_shape, calls.elu_bound(), options=(Option("alpha", "number", 1.0),),
          functions=("nn.functional.elu",), value=calls.elu, torch="torch.nn.functional.elu",
          text="np.where({a} > 0, {a}, {alpha!r} * np.expm1(np.minimum({a}, 0.0)))"),
    _call("hardswish", calls.same_shape, calls.hardswish_bound(), functions=("nn.functional.hardswish",),
          value=calls.hardswish, text="{a} * np.clip({a} + 3.0, 0.0, 6.0) / 6.0",
          torch="torch.nn.functional.hardswish"),
    _pool("avg", 1), _pool("avg", 2), _pool("max", 1), _pool("max", 2),
    # nearest interpolation: a gather, exact
    _call("interpolate", calls.interpolate_shape, calls.interpolate_bound,
          options=(Option("size", "ints", None), Option("scale_factor", "numbers", None),
                   Option("mode", "choice", "nearest", choices=("nearest",))),
          functions=("nn.functional.interpolate",), exact=True, text=calls.interpolate_text,
          torch="torch.nn.functional.interpolate",
          aten=("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d"), op_class="layout", rows="none"),
    # clamp(min, max): exact (the result is the input or a bound)
    _call("clamp", calls.same_shape, calls.clamp_bound,
          options=(Option("min", "number", None), Option("max", "number", None)), functions=("clamp",),
          method=True, exact=True, aten=("clamp", "clamp_min", "clamp_max", "clip"),
          text="np.clip({a}, {min!r}, {max!r})", torch="torch.clamp"),
    # ones of a tensor's shape and dtype (a mask of all-valid elements): exact, computes nothing from values
    _call("ones_like", calls.same_shape, calls.ones_bound, functions=("ones_like",), exact=True, op_class="layout",
          rows="none", text="np.ones_like({a})", torch="torch.ones_like"),
)
TABLE = TABLE + CALLS

BY_NAME: dict[str, Op] = {op.name: op for op in TABLE}
UNARY = tuple(op.name for op in TABLE if op.kind == "unary")
BINARY = tuple(op.name for op in TABLE if op.kind == "binary")
REDUCE = tuple(op.name for op in TABLE if op.kind == "reduce")
NORMS = tuple(op.name for op in TABLE if op.kind == "norm")
SHAPE = tuple(op.name for op in TABLE if op.kind == "shape")
CALL = tuple(op.name for op in TABLE if op.kind == "call")
# Shape ops whose arguments are a list of sizes or dims (also spelled as one tuple/list argument).
SIZES = ("view", "reshape", "expand", "permute")


def get(name: str) -> Op:
    return BY_NAME[name]


def is_exact(name: str) -> bool:
    """Whether op `name`'s result is not rounded (abs, shape ops)."""
    return name in BY_NAME and BY_NAME[name].exact


# -- attribution's pairing rule (harness/attribution/match.py reads these; repro scripts get them as literals)
# The parts of an F.* norm (harness.program.expand) and the op each computes.
NORM_PARTS = {"mean": "mean", "centered": "sub", "variance": "var", "var_eps": "add", "ms_eps": "add",
              "std": "sqrt", "rstd": "rsqrt", "normalize": "mul", "scale": "mul", "square": "pow",
              "mean_square": "mean"}
# Values a graph holds that compute nothing: layout, copies, asserts, tuple items.
_NOT_COMPUTED = ("expand_dims", "permute_dims", "broadcast_to", "flatten", "_assert_tensor_metadata", "getitem")


# OpenVINO's op types (its opset's CamelCase names, which the OpenVINO paths' intermediates carry) that move
# values without computing them; those that compute are in their ops' `compiled` names.
OPENVINO_LAYOUT = ("Reshape", "Squeeze", "Unsqueeze", "Transpose", "Broadcast", "Concat", "StridedSlice", "Slice",
                   "Gather", "Split", "VariadicSplit")


def _canonical_names() -> dict[str, str]:
    names: dict[str, str] = {}
    for op in TABLE:
        if op.op_class == "layout":
            continue
        # x*x and x**2 are one computation; so are x @ W and F.linear (dot products: mm, bmm, dense)
        canonical = {"square": "pow", "matmul": "linear"}.get(op.name, op.name)
        for name in (op.name, *op.aten, *op.compiled):
            names.setdefault(name, canonical)
    return names


CANONICAL: dict[str, str] = _canonical_names()
LAYOUT: frozenset = frozenset(
    {n for op in TABLE if op.op_class == "layout" for n in (op.name, *op.aten, *op.compiled)} | set(_NOT_COMPUTED)
    | set(OPENVINO_LAYOUT))
CLASSES: dict[str, str] = {op.name: op.op_class for op in TABLE if op.op_class not in ("elementwise", "layout")}
