"""The FP64 reference against hand-computed values and torch's float64 functionals."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cases import nearmiss
from harness.oracle.inputs import make_inputs
from harness.oracle.reference import reference
from harness.spec import CaseSpec

SEED = {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
        "input": {"kind": "alternating", "amplitude": 0.25}}


def test_seed_input_gives_plus_minus_one():
    spec = CaseSpec.from_dict(SEED)
    ref = reference(spec, make_inputs(spec))
    expected = 0.25 / np.sqrt(0.0625 + 1e-5)  # 0.99992…
    assert np.allclose(np.abs(ref.out), expected, rtol=0, atol=1e-15)
    assert ref.out[0, 0] < 0 < ref.out[0, 1]
    assert np.all(ref.out.astype(np.float16) == np.where(ref.out < 0, -1.0, 1.0))
    assert (ref.out_dtype, ref.rounding_dtype, ref.row_len) == ("float16", "float16", 4096)


def test_constant_rows_are_decided_by_eps():
    spec = CaseSpec.from_dict({"pattern": "rms_norm", "dtype": "float32", "shape": [2, 8],
                               "input": {"kind": "constant", "value": 0.001}, "eps": 1e-6})
    ref = reference(spec, make_inputs(spec))
    x = float(np.float32(0.001))
    assert np.allclose(ref.out, x / np.sqrt(x * x + 1e-6), rtol=1e-14)


def torch64(spec, inputs):
    """An independent computation: torch's functionals in float64."""
    x = torch.from_numpy(inputs.x.astype(np.float64))
    p = {k: torch.from_numpy(v.astype(np.float64)) for k, v in inputs.params.items()}
    w, b = p.get("weight"), p.get("bias")
    if spec.pattern == "layer_norm":
        return F.layer_norm(x, (spec.shape[-1],), w, b, spec.eps)
    if spec.pattern == "rms_norm":
        if spec.style == "gemma" and w is not None:
            w = 1 + w
        return F.rms_norm(x, (spec.shape[-1],), w, spec.eps)
    if spec.pattern == "group_norm":
        return F.group_norm(x, spec.groups, w, b, spec.eps)
    if spec.pattern == "instance_norm":
        return F.instance_norm(x, weight=w, bias=b, eps=spec.eps)
    return F.batch_norm(x, p["running_mean"], p["running_var"], w, b, False, 0.0, spec.eps)


CASES = [
    {"pattern": "layer_norm", "style": style, "dtype": dt, "shape": [3, 37]}
    for style in ("module", "upcast", "manual") for dt in ("float32", "bfloat16")
] + [
    {"pattern": "rms_norm", "style": style, "dtype": "float16", "shape": [2, 3, 40]}
    for style in ("module", "qwen", "llama", "t5", "gemma")
] + [
    {"pattern": "rms_norm", "dtype": "float16", "shape": [4, 16], "affine": "none"},
    {"pattern": "group_norm", "dtype": "float16", "shape": [2, 6, 5], "groups": 3},
    {"pattern": "group_norm", "dtype": "float32", "shape": [2, 4, 3, 3], "groups": 2, "layout": "channels_last"},
    {"pattern": "instance_norm", "dtype": "bfloat16", "shape": [2, 3, 4, 5]},
    {"pattern": "batch_norm", "dtype": "float32", "shape": [5, 3]},
    {"pattern": "batch_norm", "dtype": "float16", "shape": [2, 3, 2, 2, 2]},
]


@pytest.mark.parametrize("raw", CASES, ids=lambda r: f"{r['pattern']}-{r.get('style', 'module')}-{r['dtype']}")
def test_reference_matches_torch_float64(raw):
    spec = CaseSpec.from_dict({**raw, "params": {"kind": "normal"}, "input": {"kind": "uniform", "low": -3, "high": 5}})
    inputs = make_inputs(spec)
    ref = reference(spec, inputs)
    np.testing.assert_allclose(ref.out, torch64(spec, inputs).numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("style, weight_dtype, out, rounding", [
    ("module", "float32", "float16", "float16"),
    ("qwen", "float32", "float32", "float16"),
    ("llama", "float16", "float16", "float16"),
    ("t5", "float32", "float32", "float32"),
    ("t5", "float16", "float16", "float16"),
    ("gemma", "float32", "float16", "float16"),
])
def test_expected_dtype_follows_torch_promotion(style, weight_dtype, out, rounding):
    spec = CaseSpec.from_dict({"pattern": "rms_norm", "style": style, "dtype": "float16",
                               "weight_dtype": weight_dtype, "shape": [2, 8]})
    ref = reference(spec, make_inputs(spec))
    assert (ref.out_dtype, ref.rounding_dtype) == (out, rounding)


def test_a_program_reference_carries_its_own_bound_and_stages():
    spec = CaseSpec.from_dict(nearmiss.spec_of(nearmiss.get("qwen"), "float16"))
    ref = reference(spec, make_inputs(spec))
    assert ref.out_dtype == "float16" and ref.bound is not None and ref.bound.shape == ref.out.shape
    assert np.all(ref.bound > 0) and [s[0] for s in ref.stages][:2] == ["h", "v"]
    assert ref.row_len == 64 and int(ref.rows.max()) == 3
