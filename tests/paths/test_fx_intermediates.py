"""The FX reader (eager and the recompose paths): every node's value, and the repro script reads the same ones."""
import pytest
from helpers import assert_same_intermediates, hooked_capture, scripted_intermediates

from harness.paths import _fx_intermediates as fx
from harness.spec import CaseSpec

QWEN = {"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 8, 64], "params": {"kind": "normal"}}
LN32 = {"pattern": "layer_norm", "dtype": "float32", "shape": [4, 64], "params": {"kind": "normal"}}


@pytest.mark.slow
@pytest.mark.parametrize("raw,path", [(QWEN, "executorch-recompose"), (QWEN, "executorch-recompose-capture")])
def test_a_recompose_script_reads_the_values_attribution_reads(raw, path):
    spec = CaseSpec.from_dict(raw)
    capture = hooked_capture(spec, path)
    assert capture.intermediates and capture.output is not None
    assert_same_intermediates(capture, *scripted_intermediates(spec, path))


def test_eager_reads_a_whole_norms_float32_statistics():
    spec = CaseSpec.from_dict(LN32)
    capture = hooked_capture(spec, "eager")
    ops = [i.op for i in capture.intermediates]
    assert "aten.native_layer_norm.default#mean" in ops and "aten.native_layer_norm.default#rsqrt" in ops
    assert capture.intermediates[capture.output].op == "aten.layer_norm.default"
    assert capture.method == fx.INTERPRETED.format("torch.export of the module")
