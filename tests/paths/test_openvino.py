"""The `openvino` and `openvino-bf16` paths against the real library (openvino 2026.4, CPU plugin).

float32 norms pass on both; the runtime model says which node ran at which
precision and whether MVN or RMS was fused; what the plugin cannot take is
`unsupported` with its words; bfloat16 and float16 bits cross exactly; a
compiled model restores from its exported blob to the same bits. Attribution
reads the nodes whose Results leave the compiled model as it was (the fused
RMS's output on the Qwen bfloat16 seed, a layer norm's MVN node), and the
repro script's stage table reads the same.
"""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("openvino")

from helpers import seed  # noqa: E402

from harness import paths  # noqa: E402
from harness.core.tensors import to_torch  # noqa: E402
from harness.oracle.inputs import make_inputs  # noqa: E402
from harness.oracle.modules import build_module  # noqa: E402
from harness.paths import _ov_intermediates as ovi  # noqa: E402
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


# -- intermediates (attribution): inner nodes given Results where that changes nothing the plugin computes ---------

QWEN_BF16 = json.load(open(seed("executorch-24428-qwen-bf16.json")))


def test_the_qwen_bf16_seed_names_the_fused_rms_output_as_first_over(execute_cached):
    """The bf16 hint fuses the Qwen RMSNorm, casts and all, into a bf16 RMS: its output (the model's cast back
    to bf16) is the first stage over its bound; the float32 stages it swallowed cannot be read."""
    rec = execute_cached(QWEN_BF16, "openvino-bf16")
    assert rec["verdict"] == "inaccurate" and rec["facts"]["attribution"] == "read"
    assert rec["first_stage_over"] == "return:cast"
    by_stage = {e["stage"]: e for e in rec["attribution"]}
    first = by_stage["return:cast"]
    assert first["over"] and first["dtype"] == "bfloat16" and first["node"] == "aten::to/Convert_1 = Convert"
    # the upcast region the fusion dropped: fused, so not read (a Result there makes the plugin compute a float32
    # copy beside the bf16 RMS), shown as not computed as such
    for stage in ("h:cast", "v:pow", "v:mean", "h:rsqrt", "h:mul"):
        assert by_stage[stage]["dtype"] is None, stage
    assert by_stage["return:mul"]["node"] == "aten::mul/Multiply_1 = Multiply"
    # reading changed nothing: the re-run's output is the path's, bit for bit
    assert not any(e["approximate"] for e in rec["attribution"])
    note = rec["attribution_note"]
    assert "bit-identical" in note and "fused by the CPU plugin, not read: aten::to/Convert, aten::pow/Power" in note


@pytest.mark.parametrize("path", OV)
def test_a_float32_layer_norms_stages_all_pass_and_its_mvn_is_read(path):
    """Attribution asked of a passing float32 layer norm (as if it had failed): the MVN node (the normalize) and
    the output are read, each within its bound, and reading them leaves the output's bits."""
    from harness.attribution import attribute
    from harness.core.verdicts import Verdict

    spec = CaseSpec.from_dict(LN_F32)
    inputs = make_inputs(spec)
    runner = paths.get(path)
    out = runner.prepare(spec, build_module(spec, inputs.params), to_torch(inputs.x, spec.layout)).run(inputs.x)
    found = attribute(spec, runner, inputs, out, Verdict.INACCURATE)
    computed = [e for e in found.stages if e["dtype"] is not None]
    assert {e["node"] for e in computed} == {"aten::layer_norm/MVN = MVN", "aten::layer_norm/Add = Add"}
    assert all(e["dtype"] == "float32" and not e["over"] and not e["approximate"] for e in computed)
    assert found.first_stage_over is None and "bit-identical" in found.note


def test_a_bfloat16_layer_norm_stores_its_mvn_output_in_bfloat16_before_the_affine():
    """The issue's finding, read off the MVN node: the normalize, float32 in the program, is stored in bf16."""
    from harness.attribution import attribute
    from harness.core.verdicts import Verdict

    spec = CaseSpec.from_dict({**LN_F32, "dtype": "bfloat16"})
    inputs = make_inputs(spec)
    runner = paths.get("openvino-bf16")
    out = runner.prepare(spec, build_module(spec, inputs.params), to_torch(inputs.x, spec.layout)).run(inputs.x)
    found = attribute(spec, runner, inputs, out, Verdict.DTYPE_MISMATCH)
    normalize = {e["stage"]: e for e in found.stages}["return:layer_norm.normalize"]
    assert normalize["node"] == "aten::layer_norm/MVN = MVN" and normalize["program_dtype"] == "float32"
    assert normalize["dtype"] == "bfloat16" and found.first_stage_over == "return:layer_norm.normalize"
    assert not normalize["approximate"]


FUSED_ADD = {"pattern": "rms_norm", "dtype": "bfloat16", "shape": [4, 64], "params": {"kind": "normal"},
             "inputs": {"r": {"kind": "normal"}},
             "program": "h = x.float() + r.float()\nv = h.pow(2).mean(-1, keepdim=True)\n"
                        "normed = (h * torch.rsqrt(v + eps)).to(x.dtype) * w\nreturn normed, h.to(x.dtype)"}


def test_each_output_of_a_program_of_two_is_read_and_pairs_with_its_own_stage():
    """`return normed, h.to(x.dtype)`: both outputs are read from the model's own Results (not only the first),
    in the model's order, and each anchors its own stage; before, the residual's cast was paired with the
    normed output's node (370x its bound on a passing case)."""
    from harness.attribution import attribute
    from harness.core.verdicts import Verdict
    from harness.paths.base import input_arrays

    spec = CaseSpec.from_dict(FUSED_ADD)
    inputs = make_inputs(spec)
    runner = paths.get("openvino")
    example = tuple(to_torch(a, spec.layout) for a in input_arrays(inputs.run_arg))
    out = runner.prepare(spec, build_module(spec, inputs.params), example).run(inputs.run_arg)
    assert isinstance(out, tuple) and len(out) == 2
    capture = runner.intermediates(spec, build_module(spec, inputs.params), example)(inputs.run_arg)
    names = [it.name for it in capture.intermediates]
    assert capture.intermediates[capture.output].name == "aten::mul/Multiply_1" and names[-1] == "aten::mul/Multiply_1"
    for value, it in zip(out, [capture.intermediates[capture.output], capture.intermediates[0]]):
        assert it.value.dtype == value.dtype == ml_dtypes.bfloat16 and it.value.tobytes() == value.tobytes()
    assert capture.intermediates[0].name == "aten::to/Convert_2"  # h.to(x.dtype): the second output, its own Result
    found = attribute(spec, runner, inputs, out, Verdict.INACCURATE)
    by_stage = {e["stage"]: e for e in found.stages}
    assert by_stage["normed:mul#2"]["node"] == "aten::mul/Multiply_1 = Multiply"
    assert by_stage["return:cast"]["node"] == "aten::to/Convert_2 = Convert"
    for stage in ("normed:mul#2", "return:cast"):  # the case passes: each output within its bound
        assert by_stage[stage]["dtype"] == "bfloat16" and by_stage[stage]["max_err_over_tol"] < 1.0
    assert not any(e["approximate"] for e in found.stages) and "bit-identical" in found.note


def test_a_result_on_a_fused_node_changes_what_the_plugin_computes():
    """Why fused nodes are not read: a Result on the Qwen RMSNorm's pow splits the plugin's fused reduction into
    more nodes (a separate float32 chain computing what the fused one computes), while a Result on the weight
    multiply's input (the fused group's output) leaves the compiled nodes as they were."""
    import openvino as ov
    import torch

    spec = CaseSpec.from_dict(QWEN_F32)
    inputs = make_inputs(spec)
    with torch.no_grad():
        model = ovpath.convert(build_module(spec, inputs.params), (to_torch(inputs.x, spec.layout),))
    core, config = ov.Core(), {"INFERENCE_NUM_THREADS": 1}
    nodes = ovi.computing_nodes(ovpath.compile_cpu(core, model, config))
    split = ovi.computing_nodes(ovpath.compile_cpu(core, ovi.with_results(model, ["aten::pow/Power"]), config))
    assert len(split) > len(nodes)
    read, unread, compiled = ovi.readable_nodes(core, model, config, (inputs.x,))
    assert "aten::pow/Power" in unread and "aten::pow/Power" not in read
    assert ovi.computing_nodes(ovpath.compile_cpu(core, ovi.with_results(model, read), config)) == nodes
    assert ovi.computing_nodes(compiled) == nodes and len(compiled.outputs) == len(read) + 1


def test_the_repro_scripts_stage_table_reads_what_attribution_reads(capsys):
    """The openvino-bf16 script of the seed, its definitions run in this process: its `intermediates` (the
    path's own functions, pasted) and its stage table name the same first stage as the record."""
    from harness.repro import script as repro_script

    spec = CaseSpec.from_dict(QWEN_BF16)
    text = repro_script.render(spec, "openvino-bf16")
    assert "def exposed_runner(" in text and "def print_stage_table(" in text
    ns = {"__name__": "openvino_repro"}
    exec(compile(text, "<repro script>", "exec"), ns)  # noqa: S102 - the generated script under test
    example = tuple(ns["to_torch"](a, spec.layout) for a in ns["INPUTS"])
    out = ns["run_path"](ns["model"], example, ns["INPUTS"])
    ns["print_stage_table"](ns["model"], example, ns["INPUTS"], out, False)
    printed = capsys.readouterr().out
    assert "first stage over its bound: return:cast (computed in bfloat16" in printed
    assert "OpenVINO nodes the CPU plugin fused (not read" in printed and "approximate" not in printed


def test_a_gradient_case_converts_torchs_joint_graph_which_openvino_refuses_today():
    """OpenVINO 2026.4's frontend takes aten.native_layer_norm as one output, so the joint graph's reads of its
    mean and rstd (the backward's inputs) fail to convert: an `error` at export naming getitem, not a crash."""
    from helpers import grad_case

    from harness.paths.base import StageError

    spec, build, example, _, _ = grad_case({"pattern": "layer_norm", "dtype": "float32", "shape": [4, 16]})
    with pytest.raises(StageError, match="getitem") as info:
        paths.get("openvino").prepare(spec, build(), example)
    assert info.value.stage == "export"


def test_a_gradient_cases_joint_graph_is_not_read_and_says_why():
    from helpers import grad_case

    from harness.paths.base import IntermediatesUnavailable

    spec, build, example, _, _ = grad_case(LN_F32)
    with pytest.raises(IntermediatesUnavailable, match="gradient case's joint graph is not read on OpenVINO"):
        paths.get("openvino").intermediates(spec, build(), example)
