"""The catalog styles as programs compute the very bits of harness/oracle/modules.py's classes."""
import types

import pytest
import torch

from harness.core.tensors import to_torch
from harness.oracle import modules
from harness.program import ProgramCase, build_program_module, parse, style_program

CLASSES = {"qwen": modules.QwenRMSNorm, "llama": modules.LlamaRMSNorm, "t5": modules.T5RMSNorm,
           "gemma": modules.GemmaRMSNorm, "upcast": modules.UpcastLayerNorm, "manual": modules.ManualLayerNorm}
PATTERN = {"qwen": "rms_norm", "llama": "rms_norm", "t5": "rms_norm", "gemma": "rms_norm",
           "upcast": "layer_norm", "manual": "layer_norm"}
CASTS = ("to", "float", "type_as", "to_contiguous")
DTYPES = ("float16", "bfloat16", "float32")


def combos():
    for style, pattern in PATTERN.items():
        affines = ("none", "weight") + (("weight_bias",) if pattern == "layer_norm" else ())
        for cast in ((None,) if style == "manual" else CASTS):
            for affine in affines:
                yield style, cast, affine


def class_module(style, case, cast, affine, a):
    spec = types.SimpleNamespace(shape=case.shape, weight_dtype=case.weight_dtype, eps=case.eps, cast=cast,
                                 affine=affine)
    module = CLASSES[style](spec)
    with torch.no_grad():
        for name, attr in (("w", "weight"), ("b", "bias")):
            if getattr(module, attr) is not None:
                getattr(module, attr).copy_(to_torch(a[name]))
    return module.eval()


def run(module, x):
    with torch.no_grad():
        return module(x)


@pytest.mark.parametrize("style,cast,affine", list(combos()), ids=lambda v: str(v))
def test_style_program_is_bit_identical_to_its_class(style, cast, affine, arrays):
    for dtype in DTYPES:
        for wdtype in {dtype, "float32"}:
            case = ProgramCase(dtype, (3, 2, 48), weight_dtype=wdtype, eps=1e-6 if PATTERN[style] == "rms_norm" else 1e-5)
            a = arrays(case, seed=21, offset=0.5)
            source = style_program(PATTERN[style], style, cast, affine, dtype, wdtype)
            ours = build_program_module(parse(source, case=case), case, a)
            theirs = class_module(style, case, cast, affine, a)
            x = to_torch(a["x"])
            got, want = run(ours, x), run(theirs, x)
            assert got.dtype == want.dtype, (dtype, wdtype, source)
            assert torch.equal(got, want), (dtype, wdtype, source)


@pytest.mark.filterwarnings("ignore:Mismatch dtype")
@pytest.mark.parametrize("pattern,affine", [("layer_norm", "none"), ("layer_norm", "weight"),
                                            ("layer_norm", "weight_bias"), ("rms_norm", "none"), ("rms_norm", "weight")])
def test_module_style_is_torchs_module(pattern, affine, arrays):
    for dtype in DTYPES:
        case = ProgramCase(dtype, (4, 32), eps=1e-5)
        a = arrays(case, seed=22)
        ours = build_program_module(parse(style_program(pattern, "module", affine=affine), case=case), case, a)
        wdt = getattr(torch, dtype)
        if pattern == "layer_norm":
            theirs = torch.nn.LayerNorm(32, eps=1e-5, elementwise_affine=affine != "none",
                                        bias=affine == "weight_bias", dtype=wdt)
        else:
            theirs = torch.nn.RMSNorm(32, eps=1e-5, elementwise_affine=affine != "none", dtype=wdt)
        with torch.no_grad():
            if affine != "none":
                theirs.weight.copy_(to_torch(a["w"]))
            if affine == "weight_bias":
                theirs.bias.copy_(to_torch(a["b"]))
        x = to_torch(a["x"])
        got, want = run(ours, x), run(theirs.eval(), x)
        assert got.dtype == want.dtype and torch.equal(got, want)


def test_style_text_reads_like_model_code():
    assert style_program("rms_norm", "qwen", x_dtype="float16") == (
        "h = x.to(torch.float32)\nv = h.pow(2).mean(-1, keepdim=True)\nh = h * torch.rsqrt(v + eps)\n"
        "return w * h.to(x.dtype)")
    assert style_program("rms_norm", "llama", "float", "none", "bfloat16").endswith("out = h.bfloat16()\nreturn out")
    t5 = style_program("rms_norm", "t5", "type_as", "weight", "float32", "float16")
    assert "h = h.type_as(w)" in t5
    assert "type_as" not in style_program("rms_norm", "t5", "type_as", "weight", "float16", "float32")
    assert "memory_format=torch.contiguous_format" in style_program("layer_norm", "upcast", "to_contiguous")


@pytest.mark.parametrize("args,message", [
    (("rms_norm", "qwen", None, "weight_bias"), "no bias"),
    (("layer_norm", "qwen"), "not a layer_norm style"),
    (("rms_norm", "llama", "astype"), "cast 'astype'"),
    (("group_norm", "module"), "group_norm"),
])
def test_bad_style_requests(args, message):
    with pytest.raises(ValueError, match=message):
        style_program(*args)
