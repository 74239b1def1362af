"""TVM's training flow for a gradient case (harness/paths/_tvm_gradient.py), against the real TVM (0.27).

`tvm-decompose` runs DecomposeOpsForTraining, then relax.transform.Gradient on
sum(out * cotangent); `tvm` runs Gradient alone. What Relax cannot
differentiate is `unsupported` with its reason, found before anything compiles.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

from helpers import grad_case, grad_error  # noqa: E402

from harness import paths  # noqa: E402
from harness.paths.base import Unsupported  # noqa: E402

pytestmark = pytest.mark.slow

LAYER_NORM = {"pattern": "layer_norm", "dtype": "float16", "shape": [8, 32], "params": {"kind": "normal"}}


def test_tvm_decompose_trains_a_float16_layer_norm_and_its_library_restores_bit_for_bit():
    spec, build, example, x, expected = grad_case(LAYER_NORM)
    path = paths.get("tvm-decompose")
    prepared = path.prepare(spec, build(), example)
    out = prepared.run(x)
    assert [(o.shape, str(o.dtype)) for o in out] == [((8, 32), "float16"), ((32,), "float16"), ((32,), "float16")]
    # Rough agreement only (the scoring is the oracle's): float16 roundings of a decomposed norm on rows of 32.
    assert max(grad_error(out, expected)) < 0.05
    facts = prepared.facts
    assert facts["tvm_gradient"] == "relax.transform.Gradient" and facts["tvm_decomposed"] is True
    # layer_norm was decomposed before Gradient: what it differentiated are the decomposition's ops
    assert "relax.variance" in facts["tvm_differentiated_ops"]
    assert "relax.nn.layer_norm" not in facts["tvm_differentiated_ops"]
    assert "relax.collapse_sum_to" in facts["tvm_ops"]  # the parameters' gradients: sums over the rows
    restored = path.restore(spec, path.artifact(prepared))
    for a, b in zip(out, restored.run(x)):
        assert np.array_equal(a.view(np.uint16), b.view(np.uint16))


def test_plain_tvm_cannot_differentiate_layer_norm_undecomposed():
    spec, build, example, _, _ = grad_case(LAYER_NORM)
    with pytest.raises(Unsupported, match=r"Relax registers no gradient for relax\.nn\.layer_norm"):
        paths.get("tvm").prepare(spec, build(), example)


# nn.RMSNorm reaches Relax decomposed by torch.export (aten.rms_norm is composite): its rsqrt has no gradient.
@pytest.mark.parametrize("raw, op", [
    ({"pattern": "rms_norm", "dtype": "float16", "shape": [4, 16]}, "relax.rsqrt"),
    ({"pattern": "group_norm", "dtype": "float16", "shape": [2, 4, 3, 3], "groups": 2}, "relax.nn.group_norm"),
], ids=["rms_norm", "group_norm"])
def test_norms_relax_registers_no_gradient_for_are_unsupported(raw, op):
    spec, build, example, _, _ = grad_case(raw)
    with pytest.raises(Unsupported, match=rf"no gradient for .*{op.replace('.', '[.]')}"):
        paths.get("tvm-decompose").prepare(spec, build(), example)


def test_bfloat16_is_refused_by_gradient():
    spec, build, example, _, _ = grad_case({**LAYER_NORM, "dtype": "bfloat16"})
    with pytest.raises(Unsupported, match="refuses the dtype: .*Only Tensors of floating point dtype"):
        paths.get("tvm-decompose").prepare(spec, build(), example)


def test_tvm_decompose_inference_declares_it_cannot_train():
    path = paths.get("tvm-decompose-inference")
    assert path.trains is None and "DecomposeOpsForInference" in path.cannot_train
    assert paths.get("tvm").trains and paths.get("tvm-decompose").trains


# A layer norm written out (no norm op for DecomposeOpsForTraining to split): both TVM paths train it alike.
WRITTEN_OUT = {"pattern": "layer_norm", "style": "program", "dtype": "float32", "shape": [8, 32],
               "params": {"kind": "normal"}, "param_shapes": {"w": [32], "b": [32]},
               "program": "mean = x.mean(-1, keepdim=True)\nvar = ((x - mean) ** 2).mean(-1, keepdim=True)\n"
                          "return (x - mean) / torch.sqrt(var + eps) * w + b"}


def test_the_tvm_paths_of_a_gradient_structure_export_import_and_build_its_vjp_target_once():
    from harness.oracle.backward import joint_graph
    from harness.paths.base import export_program

    spec, build, example, x, _ = grad_case(WRITTEN_OUT)
    module = build()
    shared = export_program(joint_graph(module, example), example)  # the runner's shared program names the structure
    plain = paths.get("tvm").prepare(spec, module, example, exported=shared)
    decomposed = paths.get("tvm-decompose").prepare(spec, build(), example, exported=shared)
    assert decomposed.built is plain.built  # DecomposeOpsForTraining changed nothing: one build for both
    alone = paths.get("tvm-decompose").prepare(spec, build(), example)  # its own export, import and build
    assert alone.built is not plain.built and alone.facts == decomposed.facts
    for a, b in zip(alone.run(x), decomposed.run(x)):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
