"""The lifter's table: the handler of each ATen op (by packet name) the program language can hold.

Elementwise ops come from the op table (harness/program/ops.py: each op lists the ATen ops that compute
it); the rest are handlers of their own (lift_ops: casts, reductions, norms, F.linear; lift_shapes: views,
slices, splits, cat, repeat; lift_calls: matmul, softmax, cumsum, the activations, pools, interpolate, clamp). An op
with no entry here is outside the language.
"""
from __future__ import annotations

from harness.modules import lift_calls as c
from harness.modules import lift_ops as o
from harness.modules import lift_shapes as s
from harness.program import ops

SKIP = o.SKIP

HANDLERS = {
    **{a: o._unary(op) for op in ops.UNARY for a in ops.get(op).aten},
    "neg": o._neg,
    **{a: o._binary(op) for op in ("add", "sub", "mul", "div") for a in ops.get(op).aten},
    "pow": o._pow,
    "mean": o._reduce("mean"), "sum": o._reduce("sum"), "var": o._var_node, "std": o._std, "var_mean": o._var_mean,
    "linalg_vector_norm": o._vector_norm,
    "to": o._cast, "_to_copy": o._cast, "_to_dim_order_copy": o._cast, "type_as": o._cast,
    "layer_norm": o._norm("layer_norm"), "native_layer_norm": o._norm("layer_norm", True),
    "rms_norm": o._norm("rms_norm"), "_fused_rms_norm": o._norm("rms_norm", True),
    "group_norm": o._norm("group_norm"), "native_group_norm": o._norm("group_norm", True),
    "batch_norm": o._batch_norm, "_native_batch_norm_legit_no_training": o._batch_norm,
    "linear": o._linear,
    "view": s._to_shape, "_unsafe_view": s._to_shape, "reshape": s._to_shape, "flatten": s._to_shape,
    "unflatten": s._to_shape, "squeeze": s._to_shape, "unsqueeze": s._to_shape,
    "expand": s._expand, "expand_as": s._expand_as, "broadcast_to": s._expand, "repeat": s._repeat,
    "permute": s._permute, "transpose": s._transpose, "t": s._transpose,
    "slice": s._slice, "narrow": s._narrow_node, "select": s._select,
    "split": s._split, "split_with_sizes": s._split, "chunk": s._split, "unbind": s._split,
    "getitem": s._getitem,
    **{a: s._cat for a in ops.get("cat").aten},
    **c.HANDLERS,
    **{a: s._identity for a in ("contiguous", "clone", "alias", "detach", "lift_fresh_copy", "_clone_dim_order")},
}
