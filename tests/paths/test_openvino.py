"""The `openvino` and `openvino-bf16` paths against the real library (openvino 2026.4, CPU plugin).

float32 norms pass on both; the runtime model says which node ran at which
precision and whether MVN or RMS was fused; what the plugin cannot take is
`unsupported` with its words; bfloat16 and float16 bits cross exactly; a
compiled model restores from its exported blob to the same bits.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("openvino")

from harness import paths  # noqa: E402
from harness.core.tensors import to_torch  # noqa: E402
from harness.oracle.inputs import make_inputs  # noqa: E402
from harness.oracle.modules import build_module  # noqa: E402
from harness.paths import openvino as ovpath  # noqa: E402
from harness.spec import CaseSpec  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("openvino")]

OV = ["openvino", "openvino-bf16"]
QWEN_F32 = {"pattern": "rms_norm", "style": "qwen", "dtype": "float32", "shape": [2, 8, 64],
            "params": {"kind": "normal"}}
LN_F32 = {"pattern": "layer_norm", "dtype": "float32", "shape": [2, 64], "params": {"kind": "normal"}}


@pytest.mark.parametrize("path", OV)
def test_float32_layer_norm_passes_as_one_fused_mvn_node_in_float32(execute_cached, path):
    rec = execute_cached(LN_F32, path)
    assert rec["verdict"] == "pass", rec["message"]
    facts = rec["facts"]
    assert facts["ov_fused_mvn"] is True and "MVN:f32" in facts["ov_runtime_nodes"]
    assert facts["ov_inference_precision"] in ("f32", "bf16", "f16")


@pytest.mark.parametrize("path", OV)
def test_float32_qwen_rms_norm_passes(execute_cached, path):
    rec = execute_cached(QWEN_F32, path)
    assert rec["verdict"] == "pass", rec["message"]
    assert rec["out_dtype"] == "float32"
    assert all(n.endswith(":f32") or n.startswith("Const:i") for n in rec["facts"]["ov_runtime_nodes"])


def test_a_2d_group_norm_is_unsupported_with_openvinos_words(execute_cached):
    rec = execute_cached({"pattern": "group_norm", "dtype": "float32", "shape": [2, 8], "groups": 2}, "openvino")
    assert rec["verdict"] == "unsupported"
    assert rec["message"].startswith("openvino: Unsupported operation of type: GroupNormalization")


def test_the_bf16_hint_is_set_on_the_compiled_model(execute_cached):
    rec = execute_cached({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 64]}, "openvino-bf16")
    assert rec["facts"]["ov_inference_precision"] == "bf16"


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_every_16_bit_pattern_crosses_the_plugin_exactly(dtype):
    """Every 16-bit pattern through a compiled identity comes back as it went in (NaNs included)."""
    import torch

    bits = np.arange(2**16, dtype=np.uint16).reshape(256, 256)
    x = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16 if dtype is ml_dtypes.bfloat16 else torch.float16)
    import openvino as ov

    compiled = ovpath.compile_cpu(ov.Core(), ovpath.convert(torch.nn.Identity(), (x,)), {"INFERENCE_NUM_THREADS": 1})
    out = ovpath.run_infer(compiled, (bits.view(dtype),))
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.view(np.uint16), bits)


def test_the_exported_blob_restores_to_the_same_bits():
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "bfloat16", "shape": [2, 64], "affine": "none"})
    inputs = make_inputs(spec)
    path = paths.get("openvino-bf16")
    prepared = path.prepare(spec, build_module(spec, inputs.params), to_torch(inputs.x, spec.layout))
    restored = path.restore(spec, path.artifact(prepared))
    out = restored.run(inputs.x)
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out.view(np.uint16), prepared.run(inputs.x).view(np.uint16))


def test_an_op_openvino_cannot_convert_is_read_from_its_error():
    assert ovpath.unsupported_reason("OpConversionFailure: Check 'is_conversion_successful' failed\n"
                                     "Summary:\n-- No conversion rule found for operations: aten::foo\n") == \
        "openvino: No conversion rule found for operations: aten::foo"
    assert ovpath.unsupported_reason("RuntimeError: out of memory") is None
