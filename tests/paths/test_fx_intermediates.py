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


def test_eager_reads_the_float16_statistics_a_joint_graph_saves_for_its_backward():
    """torch's joint graph: native_layer_norm's float16 mean and rstd feed native_layer_norm_backward, so they are
    values the graph computes with (exposed, as saved); its forward output, which nothing reads, is not."""
    from helpers import grad_case

    from harness import paths

    spec, build, example, x, _ = grad_case({"pattern": "layer_norm", "dtype": "float16", "shape": [8, 64]})
    capture = paths.get("eager").intermediates(spec, build(), example)(x)
    found = {i.name: (i.op, i.dtype) for i in capture.intermediates}
    assert found["native_layer_norm[1]"] == ("aten.native_layer_norm.default#mean", "float16")
    assert found["native_layer_norm[2]"] == ("aten.native_layer_norm.default#rsqrt", "float16")
    assert "native_layer_norm[0]" not in found
    assert [found[f"native_layer_norm_backward[{k}]"][1] for k in range(3)] == ["float16"] * 3
    out = paths.get("eager").prepare(spec, build(), example).run(x)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(capture.rerun_output, out))  # the re-run is eager's
