"""The catalog styles as programs compute the very bits of the upstream classes they follow, every cast included."""
import pytest
import torch
from upstream_norms import manual_layer_norm, upstream

from harness.core.tensors import to_torch
from harness.program import ProgramCase, build_program_module, parse, style_program

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


def theirs(style, case, affine, a, x):
    """The upstream class (the textbook formula for `manual`) on x, with the case's parameters."""
    w = a["w"] if affine != "none" else None
    b = a["b"] if affine == "weight_bias" else None
    with torch.no_grad():
        if style == "manual":
            return manual_layer_norm(x, None if w is None else to_torch(w), None if b is None else to_torch(b),
                                     case.eps)
        return upstream(style, case.shape[-1], case.eps, case.dtype, case.weight_dtype, w, b)(x)


def run(module, x):
    with torch.no_grad():
        return module(x)


@pytest.mark.parametrize("style,cast,affine", list(combos()), ids=lambda v: str(v))
def test_style_program_is_bit_identical_to_its_upstream_class(style, cast, affine, arrays):
    """Every cast spelling gives the same bits in eager: each is held to the one upstream spelling."""
    checked = 0
    for dtype in DTYPES:
        for wdtype in {dtype, "float32"}:
            if style == "upcast" and wdtype != "float32" and affine != "none":
                continue  # open_clip keeps LayerNormFp32's parameters in float32
            case = ProgramCase(dtype, (3, 2, 48), weight_dtype=wdtype, eps=1e-6 if PATTERN[style] == "rms_norm" else 1e-5)
            a = arrays(case, seed=21, offset=0.5)
            source = style_program(PATTERN[style], style, cast, affine, dtype, wdtype)
            x = to_torch(a["x"])
            got, want = run(build_program_module(parse(source, case=case), case, a), x), theirs(style, case, affine, a, x)
            assert got.dtype == want.dtype, (dtype, wdtype, source)
            assert torch.equal(got, want), (dtype, wdtype, source)
            checked += 1
    assert checked >= 3


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
    assert style_program("layer_norm", "upcast", "to", "weight_bias", "float16") == (  # parameters first, as the model
        "weight = w.to(torch.float32)\nbias = b.to(torch.float32)\n"
        "h = F.layer_norm(x.to(torch.float32), (x.shape[-1],), weight, bias, eps)\nreturn h.to(x.dtype)")


@pytest.mark.parametrize("args,message", [
    (("rms_norm", "qwen", None, "weight_bias"), "no bias"),
    (("layer_norm", "qwen"), "not a layer_norm style"),
    (("rms_norm", "llama", "astype"), "cast 'astype'"),
    (("group_norm", "module"), "group_norm"),
])
def test_bad_style_requests(args, message):
    with pytest.raises(ValueError, match=message):
        style_program(*args)
