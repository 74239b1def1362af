"""The pattern catalog: every style is its model's code, and the FP64 reference is its mathematics.

Three independent checks: (1) the reference's NumPy formulas against the
module's own code run by torch in float64 (`float64_twin`); (2) each style
bit for bit against a verbatim copy of the upstream class it imitates; (3)
the output dtype torch gives against the one the reference expects.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from harness.oracle.inputs import make_inputs
from harness.oracle.modules import build_module, float64_twin, upcast
from cases.suites import variants
from harness.oracle.reference import reference
from harness.spec import CaseSpec, SpecError
from harness.core.tensors import to_numpy, to_torch

SHAPES = {"layer_norm": [3, 2, 40], "rms_norm": [3, 2, 40], "group_norm": [2, 6, 5, 3],
          "instance_norm": [2, 3, 4, 5], "batch_norm": [4, 3, 2, 5]}


def spec_of(pattern, style, cast, dtype="float16", affine=None, **extra):
    raw = {"pattern": pattern, "style": style, "dtype": dtype, "shape": SHAPES[pattern],
           "params": {"kind": "normal"}, "input": {"kind": "uniform", "low": -2, "high": 5}, **extra}
    if cast:
        raw["cast"] = cast
    if affine:
        raw["affine"] = affine
    if pattern == "group_norm":
        raw["groups"] = 3
    return CaseSpec.from_dict(raw)


AFFINES = ("none", "weight", "weight_bias")


@pytest.mark.parametrize("variant", variants(), ids=lambda v: "-".join(filter(None, v)))
def test_reference_is_the_modules_own_mathematics_in_float64(variant):
    pattern, style, cast = variant
    checked = 0
    for dtype in ("float32", "bfloat16"):
        for affine in AFFINES:
            try:
                spec = spec_of(pattern, style, cast, dtype, affine)
            except SpecError:
                continue  # e.g. rms_norm has no bias
            inputs = make_inputs(spec)
            twin = float64_twin(build_module(spec, inputs.params))
            with torch.no_grad():
                y = twin(torch.from_numpy(inputs.x.astype(np.float64)))
            assert y.dtype == torch.float64
            np.testing.assert_allclose(reference(spec, inputs).out, y.numpy(), rtol=1e-12, atol=1e-12,
                                       err_msg=str(spec))
            checked += 1
    assert checked >= 2


def test_batch_norm_uses_the_running_statistics_from_params():
    spec = spec_of("batch_norm", "module", None, "float32")
    inputs = make_inputs(spec)
    module = build_module(spec, inputs.params)
    assert not module.training
    np.testing.assert_array_equal(to_numpy(module.running_mean), inputs.params["running_mean"])
    np.testing.assert_array_equal(to_numpy(module.running_var), inputs.params["running_var"])
    assert not np.allclose(inputs.params["running_var"], 1.0)  # a "normal" draw, not the identity


# -- the upstream classes, verbatim (transformers, Meta Llama, open_clip) ----------

class Qwen2RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class MetaLlamaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class GemmaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class LayerNormFp32(nn.LayerNorm):
    def forward(self, x):
        orig_type = x.dtype
        x = F.layer_norm(x.to(torch.float32), self.normalized_shape, self.weight, self.bias, self.eps)
        return x.to(orig_type)


UPSTREAM = {
    ("rms_norm", "qwen"): Qwen2RMSNorm, ("rms_norm", "llama"): MetaLlamaRMSNorm,
    ("rms_norm", "t5"): T5LayerNorm, ("rms_norm", "gemma"): GemmaRMSNorm,
    ("layer_norm", "upcast"): LayerNormFp32,
}


DTYPE_PAIRS = [("float16", "float16"), ("bfloat16", "bfloat16"), ("float16", "float32"), ("bfloat16", "float32")]
UPSTREAM_CASES = [(pattern, style, dtype, weight_dtype) for (pattern, style) in UPSTREAM
                  for dtype, weight_dtype in DTYPE_PAIRS
                  # open_clip keeps LayerNormFp32's parameters in float32
                  if style != "upcast" or weight_dtype == "float32"]


@pytest.mark.parametrize("pattern, style, dtype, weight_dtype", UPSTREAM_CASES)
def test_each_style_is_its_upstream_class_bit_for_bit(pattern, style, dtype, weight_dtype):
    spec = CaseSpec.from_dict({"pattern": pattern, "style": style, "dtype": dtype, "weight_dtype": weight_dtype,
                               "shape": [3, 4, 96], "params": {"kind": "normal"},
                               "input": {"kind": "outlier", "std": 1, "scale": 30}})
    inputs = make_inputs(spec)
    ours = build_module(spec, inputs.params)
    theirs = UPSTREAM[(pattern, style)](96, eps=spec.eps).to(getattr(torch, weight_dtype)).eval()
    with torch.no_grad():
        for name, value in inputs.params.items():
            getattr(theirs, name).copy_(to_torch(value))
        x = to_torch(inputs.x)
        a, b = ours(x), theirs(x)
    assert a.dtype == b.dtype
    assert torch.equal(a, b), f"{spec}: max diff {(a.double() - b.double()).abs().max().item()}"


# -- dtypes and cast styles ------------------------------------------------------

@pytest.mark.parametrize("variant", variants(), ids=lambda v: "-".join(filter(None, v)))
def test_eager_output_dtype_is_the_one_the_reference_expects(variant):
    pattern, style, cast = variant
    seen = 0
    for dtype in ("float32", "float16", "bfloat16"):
        for weight_dtype in dict.fromkeys((dtype, "float32")):
            for affine in AFFINES:
                try:
                    spec = spec_of(pattern, style, cast, dtype, affine, weight_dtype=weight_dtype)
                except SpecError:
                    continue
                inputs = make_inputs(spec)
                with torch.no_grad():
                    y = build_module(spec, inputs.params)(to_torch(inputs.x, spec.layout))
                assert str(y.dtype).removeprefix("torch.") == reference(spec, inputs).out_dtype, str(spec)
                seen += 1
    assert seen >= 5


def test_cast_styles_differ_in_spelling_and_memory_format_only():
    x = torch.randn(2, 3, 4, 8).half().contiguous(memory_format=torch.channels_last)
    ups = {how: upcast(x, how) for how in ("to", "float", "type_as", "to_contiguous")}
    assert all(t.dtype == torch.float32 and torch.equal(t, ups["to"]) for t in ups.values())
    assert ups["to_contiguous"].is_contiguous()
    assert ups["to"].is_contiguous(memory_format=torch.channels_last)  # preserve_format keeps the layout
    outs = []
    for how in ("to", "float", "type_as", "to_contiguous"):
        spec = CaseSpec.from_dict({"pattern": "rms_norm", "style": "qwen", "cast": how, "dtype": "float16",
                                   "shape": [2, 3, 4, 8], "layout": "channels_last", "params": {"kind": "normal"}})
        inputs = make_inputs(spec)
        with torch.no_grad():
            outs.append(build_module(spec, inputs.params)(to_torch(inputs.x, spec.layout)))
    assert all(torch.equal(o, outs[0]) for o in outs)  # the same mathematics, bit for bit, in eager


def test_gemma_scales_by_one_plus_weight():
    spec = CaseSpec.from_dict({"pattern": "rms_norm", "style": "gemma", "dtype": "float32", "shape": [2, 16],
                               "params": {"kind": "ones"}, "input": {"kind": "constant", "value": 3.0}})
    out = reference(spec, make_inputs(spec)).out
    np.testing.assert_allclose(out, 2.0 * 3.0 / np.sqrt(9.0 + 1e-6), rtol=1e-15)
