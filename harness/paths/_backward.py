"""What the paths share for a gradient case (docs/gradients.md "How each path trains"): facts naming its backward ops.

A path compiling torch's joint graph (the shared export of a Backward,
harness.paths.base.export_program) starts from ATen's backward ops as autograd
dispatched them (`aten.native_layer_norm_backward.default`, …). Whether the path's
own graph still calls each, or decomposed it (into the ops its own facts list:
`edge_ops`, `tvm_ops`, …), is the fact a reader of a failing gradient asks first.
"""
from __future__ import annotations

from harness.paths._executorch_common import op_name

# The names by which a graph's op is a backward op: ATen's `*_backward` ops (native_layer_norm_backward,
# native_group_norm_backward, native_batch_norm_backward, _fused_rms_norm_backward, …).
BACKWARD_MARK = "_backward"


def backward_ops(graph) -> list[str]:
    """The backward ops an fx graph calls (sorted, unique names: aten.native_layer_norm_backward.default)."""
    return sorted({op_name(n.target) for n in graph.nodes
                   if n.op == "call_function" and BACKWARD_MARK in op_name(n.target)})


def joint_facts(exported, ran: list[str] | None = None) -> dict:
    """The facts of a path compiling torch's joint graph `exported` (an ExportedProgram, or make_fx's GraphModule).

    `joint_backward_ops`: the backward ops of the joint graph as exported;
    `backward_kept`: those the path's own graph still calls (`ran`, the names of its ops in ATen's terms:
    every other one was decomposed), or absent where the path's ops are not ATen's (ONNX, OpenVINO, MLIR).
    """
    found = backward_ops(exported.graph)
    facts: dict = {"joint_backward_ops": found}
    if ran is not None:
        kept = {_base(o) for o in ran}
        facts["backward_kept"] = [o for o in found if _base(o) in kept]
    return facts


def _base(name: str) -> str:
    """An op's name without its overload and dialect prefix (aten.native_layer_norm_backward)."""
    return name.rsplit(".", 1)[0] if name.count(".") >= 2 else name
