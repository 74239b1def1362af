"""The lifter's handlers of the ops around a norm: each ATen op written as the program language's call op
(harness/program/calls.py, the op table's "call" rows), its options normalised as the parser normalises
them, so a lifted program renders and parses back to the same IR.

An ATen argument the language cannot write (a pool's ceil_mode or dilation, elu's scale, a divisor
override) is one Unliftable line naming it.
"""
from __future__ import annotations

from harness.core.dtypes import name_of
from harness.modules.lift_ops import Lifter, Val, _arg, _fresh, _Unread, to
from harness.program import ops
from harness.program.ir import BinOp, Call, Number, ShapeOp, Unary


def _options(op: str, **given) -> tuple:
    """Every option of `op`, in the op table's order, the given ones set and the rest their defaults."""
    return tuple((o.name, given.get(o.name, o.default)) for o in ops.get(op).options)


def _ints(v):
    """A size list of the graph as the IR's ints: one int, or a tuple of them."""
    if isinstance(v, (list, tuple)):
        return tuple(int(n) for n in v)
    return int(v)


def _emit_cast(lf: Lifter, node, x: Val, dtype, expr_of):
    """The call on x, first cast to `dtype` where the ATen op computes in another one (dtype=, half_to_float)."""
    src = x.expr
    if dtype is not None and name_of(dtype) != x.dtype:
        src = to(src, name_of(dtype))
    lf.emit(node, expr_of(src))


def _matmul(lf: Lifter, node):
    a, b = lf.tensor(node, node.args[0]), lf.tensor(node, node.args[1])
    lf.kinds.append("matmul")
    lf.emit(node, Call("matmul", (a.expr, b.expr)))


def _softmax(lf: Lifter, node):
    x = lf.tensor(node, node.args[0])
    dim = int(node.args[1])
    target = str(node.target)
    dtype = None
    if "._softmax" in target:
        if node.args[2]:  # half_to_float: a float32 result of a float16 input
            dtype = "float32"
    else:
        dtype = _arg(node, 2, "dtype")
    _emit_cast(lf, node, x, dtype, lambda src: Call("softmax", (src,), _options("softmax", dim=dim)))


def _cumsum(lf: Lifter, node):
    x = lf.tensor(node, node.args[0])
    dim = int(node.args[1])
    _emit_cast(lf, node, x, node.kwargs.get("dtype", _arg(node, 2, "dtype")),
               lambda src: Call("cumsum", (src,), _options("cumsum", dim=dim)))


def _gelu(lf: Lifter, node):
    x = lf.tensor(node, node.args[0])
    form = node.kwargs.get("approximate", _arg(node, 1, "approximate", "none"))
    lf.emit(node, Call("gelu", (x.expr,), _options("gelu", approximate=form)))


def _elu(lf: Lifter, node):
    x = lf.tensor(node, node.args[0])
    alpha, scale, input_scale = (_arg(node, 1, "alpha", 1), _arg(node, 2, "scale", 1),
                                 _arg(node, 3, "input_scale", 1))
    if scale != 1 or input_scale != 1:
        lf.fail(node, f"scales its input or output (scale={scale}, input_scale={input_scale}), which F.elu "
                      "does not write")
    lf.emit(node, Call("elu", (x.expr,), _options("elu", alpha=float(alpha))))


def _hardswish(lf: Lifter, node):
    lf.emit(node, Call("hardswish", (lf.tensor(node, node.args[0]).expr,), _options("hardswish")))


def _pool(kind: str):
    def handle(lf: Lifter, node):
        x = lf.tensor(node, node.args[0])
        packet = str(node.target).split(".")[1]
        n = int(packet[len(kind) + 5])
        op = f"{kind}_pool{n}d"
        kernel, stride, padding = (_ints(node.args[1]), _ints(_arg(node, 2, "stride", [])),
                                   _ints(_arg(node, 3, "padding", 0)))
        given = {"kernel_size": kernel, "stride": stride if stride != () else None, "padding": padding}
        if kind == "avg":
            ceil, include = _arg(node, 4, "ceil_mode", False), _arg(node, 5, "count_include_pad", True)
            if _arg(node, 6, "divisor_override") is not None:
                lf.fail(node, "divides by a divisor_override, which the language does not write")
            given["count_include_pad"] = bool(include)
        else:
            dilation, ceil = _ints(_arg(node, 4, "dilation", 1)), _arg(node, 5, "ceil_mode", False)
            if any(d != 1 for d in (dilation if isinstance(dilation, tuple) else (dilation,))):
                lf.fail(node, f"dilates its window ({dilation}), which the language does not write")
        if ceil:
            lf.fail(node, "rounds its output size up (ceil_mode), which the language does not write")
        lf.kinds.append(op)
        expr = Call(op, (x.expr,), _options(op, **given))
        if packet.endswith("with_indices"):
            name = _fresh(node.name, lf.taken)
            lf.assign(name, expr)
            lf.env[node.name] = (Val(name, node.meta["val"][0]), _Unread(op, 1))
        else:
            lf.emit(node, expr)
    return handle


def _upsample_nearest(lf: Lifter, node):
    x = lf.tensor(node, node.args[0])
    out = tuple(int(n) for n in node.meta["val"].shape[2:])
    target = str(node.target)
    if target.endswith(".vec"):
        size, scales = _arg(node, 1, "output_size"), _arg(node, 2, "scale_factors")
    else:
        size = _arg(node, 1, "output_size")
        scales = [a for a in node.args[2:] if a is not None] or None
    if scales and all(s is not None for s in scales) and (size is None or tuple(
            int(n * s // 1) for n, s in zip(x.shape[2:], scales)) == out):
        given = {"scale_factor": tuple(float(s) for s in scales)}
    else:
        given = {"size": out}
    lf.emit(node, Call("interpolate", (x.expr,), _options("interpolate", **given)))


def _clamp(lf: Lifter, node):
    x = lf.tensor(node, node.args[0])
    packet = str(node.target).split(".")[1]
    if packet == "clamp_min":
        lo, hi = node.args[1], None
    elif packet == "clamp_max":
        lo, hi = None, node.args[1]
    else:
        lo, hi = _arg(node, 1, "min"), _arg(node, 2, "max")
    for bound in (lo, hi):
        if bound is not None and not isinstance(bound, (int, float)):
            lf.fail(node, "clamps to a tensor, which the language does not write (a number it does)")
    lf.emit(node, Call("clamp", (x.expr,), _options("clamp", min=None if lo is None else float(lo),
                                                       max=None if hi is None else float(hi))))


def _ones_like(lf: Lifter, node):
    x = lf.tensor(node, node.args[0])
    out = name_of(node.meta["val"].dtype)
    expr = Call("ones_like", (x.expr,), ())
    if out != x.dtype:
        if out not in ("float32", "float16", "bfloat16"):
            lf.fail(node, f"makes a {out} tensor (the language holds float32, float16 and bfloat16)")
        expr = to(expr, out)
    lf.emit(node, expr)


def _conv(lf: Lifter, node):
    """A pointwise convolution (kernel 1, stride 1, no padding, one group): per pixel, the weight [O, C] times
    the C channels, a dot product of length C, written as W.view(O, C) @ x.reshape(N, C, pixels)."""
    x, w = lf.tensor(node, node.args[0]), lf.tensor(node, node.args[1])
    b = _arg(node, 2, "bias")
    n = len(x.shape) - 2
    geometry = {"stride": _arg(node, 3, "stride", 1), "padding": _arg(node, 4, "padding", 0),
                "dilation": _arg(node, 5, "dilation", 1)}
    flat = {k: tuple(v) if isinstance(v, (list, tuple)) else (v,) for k, v in geometry.items()}
    groups = _arg(node, 6, "groups", 1)
    if any(k != 1 for k in w.shape[2:]) or set(flat["stride"]) != {1} or set(flat["padding"]) != {0} \
            or set(flat["dilation"]) != {1} or groups != 1:
        lf.fail(node, f"convolves with a {list(w.shape[2:])} kernel (stride {list(flat['stride'])}, padding "
                      f"{list(flat['padding'])}, groups {groups}); the language holds a pointwise (1x1) one, a matmul")
    batch, channels, pixels = x.shape[0], x.shape[1], 1
    for size in x.shape[2:]:
        pixels *= size
    out = w.shape[0]
    product = Call("matmul", (ShapeOp("view", w.expr, (Number(out), Number(channels))),
                              ShapeOp("reshape", x.expr, (Number(batch), Number(channels), Number(pixels)))))
    expr = ShapeOp("reshape", product, tuple(Number(k) for k in (batch, out) + x.shape[2:]))
    if b is not None:
        expr = BinOp("add", expr, ShapeOp("index", lf.tensor(node, b).expr, (":",) + ("None",) * n))
    lf.kinds.append("matmul")
    lf.emit(node, expr)


def _activation_backward(kind: str):
    """silu_backward(g, x), sigmoid_backward(g, y), tanh_backward(g, y): a gated norm's activation in a gradient
    case's joint graph, written out as ATen's CPU kernels compute it: in float32 (opmath), rounded once."""
    def handle(lf: Lifter, node):
        g, v = lf.tensor(node, node.args[0]), lf.tensor(node, node.args[1])
        g32, v32 = (t.expr if t.dtype == "float32" else to(t.expr, "float32") for t in (g, v))
        one = Number(1)
        if kind == "silu":  # g · s · (1 + x · (1 − s)), s = sigmoid(x)
            s = Unary("sigmoid", v32)
            expr = BinOp("mul", g32, BinOp("mul", s, BinOp("add", one, BinOp("mul", v32, BinOp("sub", one, s)))))
        elif kind == "sigmoid":  # g · y · (1 − y)
            expr = BinOp("mul", g32, BinOp("mul", v32, BinOp("sub", one, v32)))
        else:  # tanh: g · (1 − y²)
            expr = BinOp("mul", g32, BinOp("sub", one, BinOp("mul", v32, v32)))
        out = name_of(node.meta["val"].dtype)
        lf.emit(node, expr if out == "float32" else to(expr, out))
    return handle


HANDLERS = {
    "silu_backward": _activation_backward("silu"), "sigmoid_backward": _activation_backward("sigmoid"),
    "tanh_backward": _activation_backward("tanh"),
    "conv1d": _conv, "conv2d": _conv,
    **{a: _matmul for a in ops.get("matmul").aten},
    **{a: _softmax for a in ops.get("softmax").aten},
    "cumsum": _cumsum, "gelu": _gelu, "elu": _elu, "hardswish": _hardswish,
    **{a: _pool(kind) for kind in ("avg", "max") for n in (1, 2) for a in ops.get(f"{kind}_pool{n}d").aten},
    **{a: _upsample_nearest for a in ops.get("interpolate").aten},
    **{a: _clamp for a in ops.get("clamp").aten},
    "ones_like": _ones_like,
}
