"""The `onnxruntime` and `onnxruntime-fused` paths against the real exporter and runtime
(torch 2.13 torch.onnx dynamo export, onnxruntime 1.32, CPU).

Known-good cases pass on both; which fusions ORT's optimizer fires is read
from the optimized model; what the CPU provider cannot run (bfloat16 kernels
it lacks) is `unsupported` with ORT's reason, and what it can run in
bfloat16 passes; bfloat16 crosses into and out of ORT bit for bit; export
chatter stays off the worker's log.
"""
from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from harness import paths  # noqa: E402
from harness.spec import CaseSpec  # noqa: E402
from harness.core.tensors import to_torch  # noqa: E402
from harness.oracle.inputs import make_inputs  # noqa: E402
from harness.oracle.modules import build_module  # noqa: E402
from harness.paths.onnxruntime import session_runner, unsupported_reason  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("onnxruntime")]

ORT = ["onnxruntime", "onnxruntime-fused"]

KNOWN_GOOD = [
    {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
     "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0}},      # the TVM seed
    {"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 8, 64],
     "params": {"kind": "normal"}},                                            # the ExecuTorch seed
    {"pattern": "layer_norm", "dtype": "bfloat16", "shape": [2, 64]},         # ORT has bf16 LayerNormalization
    {"pattern": "group_norm", "dtype": "float32", "shape": [2, 8, 4, 4], "groups": 2},
    {"pattern": "instance_norm", "dtype": "float16", "shape": [2, 4, 3, 3]},
    {"pattern": "batch_norm", "dtype": "float32", "shape": [2, 4, 3, 3], "params": {"kind": "normal"}},
]

MANUAL_LN = {"pattern": "layer_norm", "style": "manual", "dtype": "float32", "shape": [2, 64],
             "params": {"kind": "normal"}}
RMS_F32 = {"pattern": "rms_norm", "dtype": "float32", "shape": [2, 64], "params": {"kind": "normal"}}


@pytest.mark.parametrize("path", ORT)
@pytest.mark.parametrize("raw", KNOWN_GOOD, ids=lambda r: f"{r['pattern']}-{r.get('style', 'module')}-{r['dtype']}")
def test_known_good_cases_pass(execute_cached, raw, path):
    rec = execute_cached(raw, path)
    assert rec["verdict"] == "pass", rec["message"]
    assert rec["out_dtype"] == rec["expected_dtype"]
    facts = rec["facts"]
    assert facts["ort_optimization"] == ("ORT_ENABLE_ALL" if path == "onnxruntime-fused" else "ORT_DISABLE_ALL")
    assert facts["onnx_ops"] and facts["onnx_opset"] >= 18
    assert ("ort_ops" in facts) is (path == "onnxruntime-fused")


def test_layer_norm_fusion_fires_on_a_hand_written_layer_norm(execute_cached):
    plain = execute_cached(MANUAL_LN, "onnxruntime")
    fused = execute_cached(MANUAL_LN, "onnxruntime-fused")
    assert plain["verdict"] == fused["verdict"] == "pass", (plain["message"], fused["message"])
    assert {"ReduceMean", "Sub", "Pow", "Sqrt", "Div"} <= set(fused["facts"]["onnx_ops"])
    assert "LayerNormalization" not in fused["facts"]["onnx_ops"]
    assert fused["facts"]["ort_fused"] == ["LayerNormalization"]
    assert fused["facts"]["ort_ops"] == ["LayerNormalization"]


def _rms_module(div: bool):
    """An RMSNorm written x / sqrt(mean(x^2) + eps) (`div`) or x * rsqrt(mean(x^2) + eps)."""
    import torch

    class RmsNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, 64))

        def forward(self, x):
            v = x.pow(2).mean(-1, keepdim=True)
            return self.weight * (x / torch.sqrt(v + 1e-6) if div else x * torch.rsqrt(v + 1e-6))

    return RmsNorm().eval()


def test_simplified_layer_norm_fusion_fires_on_div_sqrt_not_on_rsqrt():
    """SimplifiedLayerNormFusion matches Pow-ReduceMean-Add-Sqrt-Div; the exporter writes
    torch.rsqrt as Sqrt -> Reciprocal -> Mul, which it does not match."""
    import torch

    spec = CaseSpec.from_dict(RMS_F32)
    x = make_inputs(spec).x
    for div in (True, False):
        module = _rms_module(div)
        prepared = paths.get("onnxruntime-fused").prepare(spec, module, to_torch(x))
        with torch.no_grad():
            expected = module(to_torch(x)).numpy()
        np.testing.assert_allclose(prepared.run(x), expected, rtol=1e-5, atol=1e-6)
        facts = prepared.facts
        if div:
            assert facts["ort_fused"] == ["SimplifiedLayerNormalization"], facts
            assert facts["ort_ops"] == ["SimplifiedLayerNormalization"]
        else:
            assert "Reciprocal" in facts["onnx_ops"] and facts["ort_fused"] == [], facts


@pytest.mark.parametrize("raw,path,kernel", [
    ({"pattern": "rms_norm", "style": "qwen", "dtype": "bfloat16", "shape": [2, 64]}, "onnxruntime", "Mul(14)"),
    ({"pattern": "rms_norm", "style": "qwen", "dtype": "bfloat16", "shape": [2, 64]}, "onnxruntime-fused", "Mul(14)"),
    ({"pattern": "batch_norm", "dtype": "bfloat16", "shape": [2, 4, 3, 3]}, "onnxruntime", "BatchNormalization(15)"),
    ({"pattern": "layer_norm", "style": "manual", "dtype": "bfloat16", "shape": [2, 64]}, "onnxruntime",
     "ReduceMean(18)"),
])
def test_bfloat16_without_a_cpu_kernel_is_unsupported_with_the_reason(execute_cached, raw, path, kernel):
    rec = execute_cached(raw, path)
    assert rec["verdict"] == "unsupported", rec["message"]
    assert rec["message"] == f"onnxruntime's CPU provider has no kernel for {kernel} with these types (bfloat16)"


def test_bfloat16_instance_norm_is_unsupported_and_says_why(execute_cached):
    rec = execute_cached({"pattern": "instance_norm", "dtype": "bfloat16", "shape": [2, 4, 3, 3]}, "onnxruntime")
    assert rec["verdict"] == "unsupported"
    assert "bfloat16 InstanceNormalization" in rec["message"] and "opset" in rec["message"]


def test_the_fusion_lets_a_bfloat16_hand_written_layer_norm_run(execute_cached):
    """No bfloat16 ReduceMean on the CPU provider, but LayerNormFusion replaces it by a kernel that has one."""
    rec = execute_cached({"pattern": "layer_norm", "style": "manual", "dtype": "bfloat16", "shape": [2, 64]},
                         "onnxruntime-fused")
    assert rec["verdict"] == "pass", rec["message"]
    assert rec["out_dtype"] == "bfloat16" and rec["facts"]["ort_fused"] == ["LayerNormalization"]


def test_other_session_errors_are_not_called_unsupported():
    assert unsupported_reason("[ONNXRuntimeError] : 1 : FAIL : Load model failed", {"float16"}) is None
    assert unsupported_reason("Type Error: Type 'tensor(bfloat16)' of input parameter", {"float16"}) is None


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_tensor_crossing_is_bit_exact(dtype):
    """Every 16-bit pattern through an ONNX Identity comes back as it went in (NaNs included)."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    elem = TensorProto.BFLOAT16 if dtype is ml_dtypes.bfloat16 else TensorProto.FLOAT16
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                              [helper.make_tensor_value_info("x", elem, [256, 256])],
                              [helper.make_tensor_value_info("y", elem, [256, 256])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    bits = np.arange(2**16, dtype=np.uint16).reshape(256, 256)
    out = session_runner(session)((bits.view(dtype),))
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.view(np.uint16), bits)


def test_export_chatter_stays_off_stdout_and_stderr(capfd):
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [3, 40]})  # exported here only
    inputs = make_inputs(spec)
    prepared = paths.get("onnxruntime-fused").prepare(spec, build_module(spec, inputs.params),
                                                      to_torch(inputs.x, spec.layout))
    prepared.run(inputs.x)
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out[-500:], err[-500:])


# onnxruntime's script on a trivial case: tests/paths/test_registry.py; here the fused path's own lines.
@pytest.mark.parametrize("path", ["onnxruntime-fused"])
def test_repro_script_of_a_passing_case_exits_0(path, cli_here, tmp_path):
    spec = tmp_path / "ln.json"
    spec.write_text('{"pattern": "layer_norm", "style": "manual", "dtype": "float32", "shape": [2, 64], '
                    '"params": {"kind": "normal"}}')
    script = tmp_path / "repro.py"
    proc = cli_here("repro", str(spec), "--path", path, "-o", str(script))
    assert proc.returncode == 0, proc.stderr
    scratch = tmp_path / "tmp"  # the script's temporary folder: it removes the optimized model it reads back
    scratch.mkdir()
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env={**os.environ, "TMPDIR": str(scratch)})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"OK: {path} matches the FP64 reference" in run.stdout
    if path == "onnxruntime-fused":
        assert "ONNX ops after ORT's optimizations: LayerNormalization" in run.stdout
    assert not list(scratch.rglob("*.onnx")), list(scratch.rglob("*"))


def test_the_two_paths_share_one_export_of_the_runners_program_and_leave_it_unchanged(monkeypatch):
    """Given the runner's ExportedProgram, the exporter starts from it (the same bytes as from the module),
    once for both paths, and the program stays as it was for the paths still to come."""
    import torch

    spec = CaseSpec.from_dict({"pattern": "rms_norm", "dtype": "float32", "shape": [3, 24]})
    inputs = make_inputs(spec)
    x = to_torch(inputs.x, spec.layout)
    with torch.no_grad():
        ep = torch.export.export(build_module(spec, inputs.params), (x,))
    before = (ep.graph_module.code, str(ep.graph_signature), {k: v.clone() for k, v in ep.state_dict.items()})
    calls = []
    real = torch.onnx.export
    monkeypatch.setattr(torch.onnx, "export", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    plain, fused = (paths.get(p).prepare(spec, build_module(spec, inputs.params), x, exported=ep) for p in ORT)
    alone = paths.get("onnxruntime").prepare(spec, build_module(spec, inputs.params), x)  # from the module
    assert calls == [ep, calls[1]] and calls[1] is not ep  # once from the program, once from the module
    assert plain.built == alone.built and plain.facts["onnx_ops"] == fused.facts["onnx_ops"] and fused.facts["ort_ops"]
    assert (ep.graph_module.code, str(ep.graph_signature)) == before[:2]
    assert all(torch.equal(ep.state_dict[k], v) for k, v in before[2].items())


def test_torchs_joint_graph_exports_to_onnx_and_runs():
    """float32: the joint graph's ONNX model runs (float16's does not load: see docs/gradients.md)."""
    from helpers import grad_case, grad_error

    from harness.paths.base import export_program

    spec, build, example, x, expected = grad_case(
        {"pattern": "layer_norm", "dtype": "float32", "shape": [8, 32], "params": {"kind": "normal"}})
    prepared = paths.get("onnxruntime").prepare(spec, build(), example, exported=export_program(build(), example))
    out = prepared.run(x)
    assert [str(o.dtype) for o in out] == ["float32"] * 3 and max(grad_error(out, expected)) < 1e-5
    assert prepared.facts["joint_backward_ops"] == ["aten.native_layer_norm_backward.default"]
    assert "LayerNormalization" in prepared.facts["onnx_ops"]  # the forward; its backward exported as plain ops
