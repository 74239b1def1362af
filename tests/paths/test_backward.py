"""The facts naming a gradient case's backward ops (harness/paths/_backward.py), on torch's real joint graph."""
from __future__ import annotations

import torch

from harness.oracle.backward import Backward
from harness.paths._backward import joint_facts
from harness.paths._executorch_common import call_ops
from harness.paths.base import export_program


def test_joint_facts_say_whether_the_backward_op_was_kept_or_decomposed():
    example = (torch.randn(4, 16), torch.randn(4, 16))
    ep = export_program(Backward(torch.nn.LayerNorm(16), 1), example)
    op = "aten.native_layer_norm_backward.default"
    assert joint_facts(ep) == {"joint_backward_ops": [op]}  # a path whose ops are not ATen's: no `backward_kept`
    assert joint_facts(ep, call_ops(ep.graph))["backward_kept"] == [op]
    decomposed = call_ops(ep.run_decompositions().graph)  # torch's core ATen table decomposes it
    assert op not in decomposed and "aten.sum.dim_IntList" in decomposed
    assert joint_facts(ep, decomposed) == {"joint_backward_ops": [op], "backward_kept": []}
