"""The `tvm`, `tvm-decompose` and `tvm-decompose-inference` paths against the real TVM (apache-tvm 0.27).

The seed apache/tvm#20909 first, then the verdict every layer_norm / rms_norm
style gets today in each dtype. Where the verdict is not `pass`, the test id
and the comment name the upstream report it matches, or "new" when no upstream
report was found. If TVM fixes one of these, the test fails on purpose: update
the expectation (and the gate baseline).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("tvm")

from harness.oracle.inputs import make_inputs  # noqa: E402
from harness.oracle.modules import build_module  # noqa: E402
from harness import paths  # noqa: E402
from harness.engine.execute import execute  # noqa: E402
from harness.paths.tvm import tvm_array, tvm_tensor  # noqa: E402
from harness.spec import CaseSpec  # noqa: E402
from harness.core.tensors import to_torch  # noqa: E402

pytestmark = pytest.mark.slow

SEED = {
    "pattern": "layer_norm", "style": "module", "dtype": "float16", "shape": [1, 4096],
    "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0},
    "params": {"kind": "ones"}, "eps": 1e-5,
}


def _run_path(raw: dict, path: str) -> np.ndarray:
    """The raw output array of `path` on `raw` (bypassing the scoring)."""
    spec = CaseSpec.from_dict(raw)
    inputs = make_inputs(spec)
    module = build_module(spec, inputs.params)
    prepared = paths.get(path).prepare(spec, module, to_torch(inputs.x, spec.layout))
    return prepared.run(inputs.x)


# -- the seed: apache/tvm#20909 ----------------------------------------------

def test_seed_20909_float16():
    eager = execute(SEED, "eager")
    assert eager["verdict"] == "pass", eager["message"]

    tvm = execute(SEED, "tvm")
    assert tvm["verdict"] == "pass", tvm["message"]
    assert tvm["out_dtype"] == "float16"
    assert tvm["facts"] == {"tvm_decomposed": False, "tvm_ops": ["relax.nn.layer_norm"]}

    dec = execute(SEED, "tvm-decompose")
    assert dec["verdict"] == "inaccurate", dec["message"]
    assert dec["out_dtype"] == "float16"
    assert dec["max_abs_err"] == pytest.approx(0.4141, abs=1e-3)
    assert dec["facts"]["tvm_decomposed"] is True
    assert "relax.variance" in dec["facts"]["tvm_ops"]
    assert "relax.nn.layer_norm" not in dec["facts"]["tvm_ops"]


def test_seed_20909_outputs_exact():
    """The compiled layer_norm gives exactly -1, +1, ...; the decomposed one ±1.4140625."""
    out = _run_path(SEED, "tvm")
    assert out.dtype == np.float16 and out.shape == (1, 4096)
    expected = np.tile(np.array([-1.0, 1.0], np.float16), 2048).reshape(1, 4096)
    np.testing.assert_array_equal(out, expected)

    dec = _run_path(SEED, "tvm-decompose")
    assert dec.dtype == np.float16
    np.testing.assert_array_equal(dec, expected * np.float16(1.4140625))


@pytest.mark.parametrize("path", ["tvm", "tvm-decompose"])
def test_seed_20909_float32_control(path):
    raw = {**SEED, "dtype": "float32"}
    rec = execute(raw, path)
    assert rec["verdict"] == "pass", rec["message"]
    assert rec["out_dtype"] == "float32"
    out = _run_path(raw, path)
    np.testing.assert_allclose(np.abs(out), 0.25 / np.sqrt(0.0625 + 1e-5), rtol=1e-6)


# -- every layer_norm / rms_norm style x dtype x path, shape [2, 64] ---------

# (pattern, style, dtype, path) -> (verdict, upstream report or "new", one-line reason)
KNOWN = {
    ("layer_norm", "module", "float16", "tvm-decompose"): (
        "inaccurate", "apache/tvm#20909",
        "DecomposeOpsForTraining rewrites layer_norm into float16 mean/variance "
        "(float16 reduction buffers)"),
    ("layer_norm", "module", "bfloat16", "tvm-decompose"): (
        "inaccurate", "apache/tvm#20909",
        "the same decomposition in bfloat16 (the report covers float16 only)"),
    ("layer_norm", "module", "bfloat16", "tvm"): (
        "error", "new",
        "LegalizeOps: 'layer_norm: only support float32 and float16' (no upstream report found)"),
    ("layer_norm", "manual", "bfloat16", "tvm"): (
        "error", "new",
        "x ** 2 -> R.power; legalization rejects bfloat16: 'power only applies to float' "
        "(apache/tvm#19550 is the same guard for integers)"),
    ("layer_norm", "manual", "bfloat16", "tvm-decompose"): (
        "error", "new", "as for tvm: 'power only applies to float' on bfloat16"),
}

STYLES = [("layer_norm", s) for s in ("module", "upcast", "manual")] + \
         [("rms_norm", s) for s in ("module", "qwen", "llama")]


def _grid():
    for pattern, style in STYLES:
        for dtype in ("float32", "float16", "bfloat16"):
            for path in ("tvm", "tvm-decompose"):
                verdict, report, reason = KNOWN.get(
                    (pattern, style, dtype, path), ("pass", None, None))
                tag = f"{verdict}({report})" if report else verdict
                yield pytest.param(pattern, style, dtype, path, verdict, reason,
                                   id=f"{pattern}-{style}-{dtype}-{path}-{tag}")


@pytest.mark.parametrize("pattern,style,dtype,path,verdict,reason", list(_grid()))
def test_verdict_today(pattern, style, dtype, path, verdict, reason):
    raw = {"pattern": pattern, "style": style, "dtype": dtype, "shape": [2, 64]}
    rec = execute(raw, path)
    assert rec["verdict"] == verdict, f"{rec['verdict']}: {rec['message']} (expected: {reason})"
    if verdict == "error":
        assert rec["stage"] == "compile"
        assert rec["out_dtype"] is None
    else:
        # The path hands back TVM's own dtype; every style here keeps the input dtype.
        assert rec["out_dtype"] == rec["expected_dtype"] == dtype
    if (pattern, style, dtype) == ("layer_norm", "module", "bfloat16") and path == "tvm":
        assert "only support float32 and float16" in rec["message"]
    if style == "manual" and dtype == "bfloat16":
        assert "power only applies to float" in rec["message"]


# -- beyond the seed ---------------------------------------------------------

def test_manual_layer_norm_float16_long_row_plain_tvm():
    """new: R.mean on float16 legalizes to a float16 sum (x_red is float16), so a
    layer_norm written out by hand fails on the *plain* pipeline too, with the
    seed's numbers; eager accumulates in float32. (Relay fixed the same for
    mean/var in apache/tvm#13289; Relax legalization does not.)"""
    raw = {**SEED, "style": "manual"}
    assert execute(raw, "eager")["verdict"] == "pass"
    rec = execute(raw, "tvm")
    assert rec["verdict"] == "inaccurate", rec["message"]
    assert rec["max_abs_err"] == pytest.approx(0.4141, abs=1e-3)


# -- the NumPy <-> TVM crossing ---------------------------------------------

@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_tensor_crossing_is_bit_exact(dtype):
    import tvm

    bits = np.arange(2**16, dtype=np.uint16).reshape(256, 256)
    x = bits.view(dtype)
    back = tvm_array(tvm_tensor(x))
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back.view(np.uint16), bits)


# -- tvm-decompose-inference: relax's batch_norm in inference mode ------------

EVAL_BN = {"pattern": "batch_norm", "dtype": "float32", "shape": [2, 4, 3, 3], "params": {"kind": "normal"}}


def test_eval_batch_norm_float32_passes_with_decompose_for_inference():
    """Relax's batch_norm is training mode unless told otherwise (its doc): DecomposeOpsForTraining
    normalizes with the batch's statistics by design, DecomposeOpsForInference with the running ones,
    which is what an eval-mode torch BatchNorm means."""
    rec = execute(EVAL_BN, "tvm-decompose-inference")
    assert rec["verdict"] == "pass", rec["message"]
    assert rec["out_dtype"] == "float32"
    ops = rec["facts"]["tvm_ops"]
    assert "relax.nn.batch_norm" not in ops and "relax.mean" not in ops and "relax.variance" not in ops
    assert {"relax.subtract", "relax.sqrt", "relax.divide"} <= set(ops)

    training = execute(EVAL_BN, "tvm-decompose")
    assert training["verdict"] == "inaccurate", training["message"]
    assert {"relax.mean", "relax.variance"} <= set(training["facts"]["tvm_ops"])


def test_eval_batch_norm_output_is_the_running_statistics_norm():
    spec = CaseSpec.from_dict(EVAL_BN)
    inputs = make_inputs(spec)
    out = _run_path(EVAL_BN, "tvm-decompose-inference")
    p = {k: v.astype(np.float64).reshape(1, -1, 1, 1) for k, v in inputs.params.items()}
    expected = (inputs.x - p["running_mean"]) / np.sqrt(p["running_var"] + spec.eps) * p["weight"] + p["bias"]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    batch = _run_path(EVAL_BN, "tvm-decompose")
    assert np.max(np.abs(batch - expected)) > 0.1  # batch statistics: another function


def test_decompose_for_inference_keeps_layer_norm_whole():
    """The pass rewrites batch_norm only: the seed's layer_norm stays R.nn.layer_norm and passes."""
    rec = execute(SEED, "tvm-decompose-inference")
    assert rec["verdict"] == "pass", rec["message"]
    assert rec["facts"] == {"tvm_decomposed": True, "tvm_ops": ["relax.nn.layer_norm"]}


def test_repro_script_of_eval_batch_norm_exits_0(cli_here, tmp_path):
    import json
    import subprocess
    import sys

    spec = tmp_path / "bn.json"
    spec.write_text(json.dumps(EVAL_BN))
    script = tmp_path / "repro.py"
    proc = cli_here("repro", str(spec), "--path", "tvm-decompose-inference", "-o", str(script))
    assert proc.returncode == 0, proc.stderr
    assert "decomposed(imported_module(export_program(model, example, DYNAMIC)), 'DecomposeOpsForInference')" in script.read_text()
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "OK: tvm-decompose-inference matches the FP64 reference" in run.stdout


def _exported(spec):
    """(inputs, x, the ExportedProgram of its module): the export the runner shares across a structure's paths."""
    import torch

    inputs = make_inputs(spec)
    x = to_torch(inputs.x, spec.layout)
    with torch.no_grad():
        return inputs, x, torch.export.export(build_module(spec, inputs.params), (x,))


@pytest.mark.parametrize("pattern,compiles", [("layer_norm", 1), ("batch_norm", 2)])
def test_a_structure_compiles_each_distinct_module_once_for_its_tvm_paths(monkeypatch, pattern, compiles):
    """DecomposeOpsForInference leaves layer_norm whole: tvm-decompose-inference runs tvm's very executable."""
    import torch
    import tvm

    spec = CaseSpec.from_dict({"pattern": pattern, "dtype": "float32", "shape": [2, 4, 3, 3] if pattern == "batch_norm"
                               else [2, 16], "params": {"kind": "normal"}})
    inputs, x, ep = _exported(spec)
    calls = []
    real = tvm.compile
    monkeypatch.setattr(tvm, "compile", lambda *a, **k: calls.append(1) or real(*a, **k))
    shared = [paths.get(p).prepare(spec, build_module(spec, inputs.params), x, exported=ep)
              for p in ("tvm", "tvm-decompose-inference")]
    assert len(calls) == compiles
    alone = _run_path(spec.to_dict(), "tvm-decompose-inference")  # its own export, its own compile
    assert shared[1].run(inputs.x).tobytes() == alone.tobytes()
    assert shared[1].facts["tvm_decomposed"] and not shared[0].facts["tvm_decomposed"]


def test_an_import_tvm_refuses_is_paid_once_for_a_structures_tvm_paths(monkeypatch):
    """float16 x with float32 weights: TVM 0.27's importer refuses relax.nn.layer_norm (a TypeError); the other
    TVM paths of the structure get that refusal again, word for word, without importing again."""
    import torch
    import tvm.relax.frontend.torch as frontend

    from harness.paths.base import StageError

    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "weight_dtype": "float32",
                               "shape": [2, 64], "params": {"kind": "normal"}})
    inputs, x, ep = _exported(spec)
    calls = []
    real = frontend.from_exported_program
    monkeypatch.setattr(frontend, "from_exported_program", lambda *a, **k: calls.append(1) or real(*a, **k))
    messages = []
    for name in ("tvm", "tvm-decompose", "tvm-decompose-inference"):
        with pytest.raises(StageError) as err:
            paths.get(name).prepare(spec, build_module(spec, inputs.params), x, exported=ep)
        messages.append((err.value.stage, str(err.value)))
    assert len(calls) == 1
    with pytest.raises(StageError) as alone:  # its own export, its own import
        paths.get("tvm-decompose").prepare(spec, build_module(spec, inputs.params), x)
    assert len(calls) == 2 and messages == [(alone.value.stage, str(alone.value))] * 3
    assert "import: TypeError" in messages[0][1] and "relax.nn.layer_norm" in messages[0][1]
