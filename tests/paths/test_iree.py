"""The `iree` path against the real libraries (iree-turbine 3.9, iree-base-compiler/runtime 3.13, CPU).

The TVM seed (float16 layer norm, rows of ±0.25) fails on it, because
torch-mlir's layer_norm decomposition sums in float16 (the reduction dtype is
read from the compiler's linalg), and its float32 control passes; float32
norms pass; bfloat16 and float16 bits cross the runtime exactly; the repro
script of the seed exits 1.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("iree.runtime")
pytest.importorskip("iree.turbine")

from harness.paths import iree  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("iree")]

SEEDS = Path(__file__).resolve().parents[2] / "cases" / "seeds"
SEED = json.loads((SEEDS / "tvm-20909.json").read_text())
CONTROL = json.loads((SEEDS / "tvm-20909-fp32-control.json").read_text())


def test_the_tvm_seed_fails_with_its_error_and_a_float16_reduction(execute_cached):
    rec = execute_cached(SEED, "iree")
    assert rec["verdict"] == "inaccurate", rec["message"]
    assert rec["max_abs_err"] > 0.3  # ±1.414 where ±1 is right: the seed's symptom
    assert rec["eager_max_abs_err"] < 1e-3
    assert rec["out_dtype"] == "float16"
    assert rec["facts"]["iree_reduction_dtypes"] == ["f16"]
    assert rec["facts"]["iree_target_cpu"] == iree.TARGET_CPU


def test_the_float32_control_passes(execute_cached):
    rec = execute_cached(CONTROL, "iree")
    assert rec["verdict"] == "pass", rec["message"]
    assert rec["facts"]["iree_reduction_dtypes"] == ["f32"]


@pytest.mark.parametrize("raw", [
    {"pattern": "rms_norm", "style": "qwen", "dtype": "float32", "shape": [2, 8, 64], "params": {"kind": "normal"}},
    {"pattern": "layer_norm", "dtype": "float32", "shape": [2, 64], "params": {"kind": "normal"}},
], ids=["qwen-rms-f32", "layer-norm-f32"])
def test_float32_norms_pass(execute_cached, raw):
    rec = execute_cached(raw, "iree")
    assert rec["verdict"] == "pass", rec["message"]
    assert rec["out_dtype"] == rec["expected_dtype"] == "float32"


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_every_16_bit_pattern_crosses_the_runtime_exactly(dtype):
    """Every 16-bit pattern through a compiled identity comes back as it went in (NaNs included)."""
    import torch

    bits = np.arange(2**16, dtype=np.uint16).reshape(256, 256)
    x = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16 if dtype is ml_dtypes.bfloat16 else torch.float16)
    mlir = iree.turbine_mlir(torch.nn.Identity(), (x,))
    out = iree.run_main(iree.load_main(iree.compile_vmfb(mlir, iree.TARGET_CPU)), (bits.view(dtype),))
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.view(np.uint16), bits)


def test_a_bfloat16_case_without_parameters_runs_and_says_where_it_sums(execute_cached):
    rec = execute_cached({"pattern": "layer_norm", "dtype": "bfloat16", "shape": [2, 64], "affine": "none"}, "iree")
    assert rec["verdict"] in ("pass", "inaccurate"), rec["message"]
    assert rec["out_dtype"] == "bfloat16"
    assert rec["facts"]["iree_reduction_dtypes"] == ["bf16"]


def test_a_failure_to_lower_is_unsupported_with_the_compilers_words():
    message = ("Error invoking IREE compiler tool iree-compile\nDiagnostics:\n<stdin>:9:10: error: failed to "
               "legalize operation 'torch.aten.native_group_norm' that was explicitly marked illegal")
    assert iree.unsupported_reason(message) == ("torch-mlir has no lowering for torch.aten.native_group_norm "
                                                "(iree.compiler: failed to legalize operation)")
    assert iree.unsupported_reason("Error invoking IREE compiler tool iree-compile: out of memory") is None


def test_the_artifact_restores_to_the_same_bits():
    from harness import paths
    from harness.core.tensors import to_torch
    from harness.oracle.inputs import make_inputs
    from harness.oracle.modules import build_module
    from harness.spec import CaseSpec

    spec = CaseSpec.from_dict(SEED)
    inputs = make_inputs(spec)
    path = paths.get("iree")
    prepared = path.prepare(spec, build_module(spec, inputs.params), to_torch(inputs.x, spec.layout))
    restored = path.restore(spec, path.artifact(prepared))
    np.testing.assert_array_equal(restored.run(inputs.x).view(np.uint16), prepared.run(inputs.x).view(np.uint16))


def test_repro_script_of_the_seed_exits_1(cli_here, tmp_path):
    spec = tmp_path / "seed.json"
    spec.write_text(json.dumps(SEED))
    script = tmp_path / "repro.py"
    proc = cli_here("repro", str(spec), "--path", "iree", "-o", str(script))
    assert proc.returncode == 0, proc.stderr
    text = script.read_text()
    assert "import normdiff" not in text and "from harness" not in text
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert "reduction accumulator dtypes after torch-mlir: f16" in run.stdout


def test_torchs_joint_graph_compiles_as_an_inference_graph():
    from helpers import grad_case, grad_error

    from harness import paths
    from harness.paths.base import export_program

    spec, build, example, x, expected = grad_case(
        {"pattern": "layer_norm", "dtype": "float16", "shape": [8, 32], "params": {"kind": "normal"}})
    prepared = paths.get("iree").prepare(spec, build(), example, exported=export_program(build(), example))
    out = prepared.run(x)
    assert [str(o.dtype) for o in out] == ["float16"] * 3 and max(grad_error(out, expected)) < 2e-3
    assert prepared.facts["joint_backward_ops"] == ["aten.native_layer_norm_backward.default"]
    assert prepared.facts["iree_reduction_dtypes"] == ["f32"]
