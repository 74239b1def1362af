"""The pattern catalog: every style is its model's code, and the FP64 reference is its mathematics.

Four independent checks: (1) the reference's NumPy formulas against the
module's own code run by torch in float64 (`float64_twin`); (2) each style
bit for bit against a verbatim copy of the upstream class it imitates
(tests/upstream_norms.py); (3) the output dtype torch gives against the one
the reference expects; (4) a style case's module is its style's program
(harness.program.styles): the program module's exported graph and bits.
"""
import numpy as np
import pytest
import torch
from upstream_norms import upstream

from harness.spec.keys import style_variants as variants
from harness.core.tensors import to_numpy, to_torch
from harness.oracle.inputs import make_inputs
from harness.oracle.modules import StyleModule, build_module, float64_twin
from harness.oracle.reference import reference
from harness.oracle.twins import style_case
from harness.program import build_program_module, parse
from harness.spec import CaseSpec, SpecError

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


# -- each style against its upstream class ---------------------------------------

UPSTREAM = ("qwen", "llama", "t5", "gemma", "upcast")
DTYPE_PAIRS = [("float16", "float16"), ("bfloat16", "bfloat16"), ("float16", "float32"), ("bfloat16", "float32")]
UPSTREAM_CASES = [(style, dtype, weight_dtype) for style in UPSTREAM for dtype, weight_dtype in DTYPE_PAIRS
                  # open_clip keeps LayerNormFp32's parameters in float32
                  if style != "upcast" or weight_dtype == "float32"]


@pytest.mark.parametrize("style, dtype, weight_dtype", UPSTREAM_CASES)
def test_each_style_is_its_upstream_class_bit_for_bit(style, dtype, weight_dtype):
    pattern = "layer_norm" if style == "upcast" else "rms_norm"
    spec = CaseSpec.from_dict({"pattern": pattern, "style": style, "dtype": dtype, "weight_dtype": weight_dtype,
                               "shape": [3, 4, 96], "params": {"kind": "normal"},
                               "input": {"kind": "outlier", "std": 1, "scale": 30}})
    inputs = make_inputs(spec)
    ours = build_module(spec, inputs.params)
    theirs = upstream(style, 96, spec.eps, dtype, weight_dtype, inputs.params["weight"], inputs.params.get("bias"))
    with torch.no_grad():
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
    outs = {}
    for how in ("to", "float", "type_as", "to_contiguous"):
        spec = CaseSpec.from_dict({"pattern": "rms_norm", "style": "qwen", "cast": how, "dtype": "float16",
                                   "shape": [2, 3, 4, 8], "layout": "channels_last", "params": {"kind": "normal"}})
        inputs = make_inputs(spec)
        with torch.no_grad():
            outs[how] = build_module(spec, inputs.params)(to_torch(inputs.x, spec.layout))
    assert all(torch.equal(o, outs["to"]) for o in outs.values())  # the same mathematics, bit for bit, in eager
    assert outs["to_contiguous"].is_contiguous()
    assert outs["to"].is_contiguous(memory_format=torch.channels_last)  # preserve_format keeps the layout


def _call_targets(module, x):
    return [str(n.target) for n in torch.export.export(module, (x,)).graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("variant", [v for v in variants() if v[0] in ("layer_norm", "rms_norm")],
                         ids=lambda v: "-".join(filter(None, v)))
def test_a_style_module_is_its_style_program(variant):
    """build_module of a style case runs its style's program: the program module's graph and bits."""
    pattern, style, cast = variant
    for dtype, affine in (("float16", "weight"), ("bfloat16", "none"), ("float32", "weight_bias")):
        try:
            spec = spec_of(pattern, style, cast, dtype, affine)
        except SpecError:
            continue
        inputs = make_inputs(spec)
        ours = build_module(spec, inputs.params)
        text, case = style_case(spec)
        names = {"weight": "w", "bias": "b"}
        program = build_program_module(parse(text, case=case), case, {names[k]: v for k, v in inputs.params.items()})
        assert isinstance(ours, StyleModule) and ours.program.source == text
        assert sorted(ours.state_dict()) == sorted(inputs.params)  # torch's names for them
        x = to_torch(inputs.x)
        with torch.no_grad():
            got, want = ours(x), program(x)
        assert got.dtype == want.dtype and torch.equal(got, want), text
        assert _call_targets(ours, x) == _call_targets(program, x), text


def test_gemma_scales_by_one_plus_weight():
    spec = CaseSpec.from_dict({"pattern": "rms_norm", "style": "gemma", "dtype": "float32", "shape": [2, 16],
                               "params": {"kind": "ones"}, "input": {"kind": "constant", "value": 3.0}})
    out = reference(spec, make_inputs(spec)).out
    np.testing.assert_allclose(out, 2.0 * 3.0 / np.sqrt(9.0 + 1e-6), rtol=1e-15)
