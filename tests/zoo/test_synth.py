"""Spec synthesis from the source: constructor arguments, config classes, inputs, layouts."""
import pytest

from harness.zoo import corpus
from harness.zoo.classes import ref_of
from harness.zoo.synth import SynthError, specs_of, synthesize


@pytest.fixture
def tiny(tiny_models):
    c = corpus.load(root=str(tiny_models))
    return lambda name: ref_of(c, f"tinylib.models.alpha.modeling_alpha.{name}")


def test_a_last_dim_norm_gets_its_size_and_default_eps(tiny):
    base = synthesize(tiny("AlphaRMSNorm")).base
    assert base == {"pattern": "rms_norm", "class": "tinylib.models.alpha.modeling_alpha:AlphaRMSNorm",
                    "init": {"hidden_size": 64, "eps": 1e-6}, "shape": [2, 8, 64],
                    "params": {"kind": "normal"}, "seed": 0}


def test_a_config_taking_class_gets_its_model_config_class_made_small(tiny):
    init = synthesize(tiny("AlphaConfigRMSNorm")).base["init"]
    assert init == {"config": {"class": "tinylib.models.alpha.configuration_alpha:AlphaConfig",
                               "hidden_size": 64, "num_attention_heads": 4}}


def test_a_torch_layer_norm_subclass_that_permutes_is_channels_first(tiny):
    base = synthesize(tiny("AlphaLayerNorm2d")).base
    assert base["init"] == {"normalized_shape": 64, "eps": 1e-5}
    assert base["shape"] == [2, 64, 4, 4] and base["pattern"] == "layer_norm"


def test_a_gated_norm_gets_its_gate_and_group_size(tiny):
    base = synthesize(tiny("AlphaGatedRMSNorm")).base
    assert base["init"] == {"hidden_size": 64, "group_size": 16, "eps": 1e-6}
    assert base["inputs"] == {"gate": {"kind": "normal"}}


def test_a_required_argument_without_a_rule_is_one_line(tmp_path):
    root = tmp_path / "lib" / "models" / "m"
    root.mkdir(parents=True)
    for folder in (root, root.parent, root.parent.parent):
        (folder / "__init__.py").write_text("")
    (root / "modeling_m.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass MNorm(nn.Module):\n"
        "    def __init__(self, mystery):\n        super().__init__()\n\n"
        "    def forward(self, x):\n        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True))\n")
    ref = ref_of(corpus.load(root=str(root.parent)), "lib.models.m.modeling_m.MNorm")
    with pytest.raises(SynthError, match="'mystery'"):
        synthesize(ref)


def test_specs_cross_dtypes_and_inputs(tiny):
    base = synthesize(tiny("AlphaRMSNorm")).base
    specs = specs_of(base, ("float32", "bfloat16"), lambda d: [{"kind": "normal"}, {"kind": "tiny", "scale": 1e-6}])
    assert [(s["dtype"], s["input"]["kind"]) for s in specs] == [
        ("float32", "normal"), ("float32", "tiny"), ("bfloat16", "normal"), ("bfloat16", "tiny")]


@pytest.fixture(scope="module")
def tf():
    pytest.importorskip("transformers", reason="the zoo reads transformers: pip install 'normdiff[zoo]'")
    c = corpus.load(package="transformers")
    return lambda dotted: ref_of(c, "transformers.models." + dotted)


def test_transformers_config_classes_and_even_sizes(tf):
    init = synthesize(tf("zaya.modeling_zaya.ZayaQKNorm")).base["init"]
    cfg = init["config"]
    assert cfg["class"] == "transformers.models.zaya.configuration_zaya:ZayaConfig"
    assert cfg["head_dim"] == 64 and cfg["num_attention_heads"] % cfg["num_key_value_heads"] == 0
    bit = synthesize(tf("bit.modeling_bit.BitGroupNormActivation")).base
    assert bit["init"]["config"]["class"] == "transformers.models.bit.configuration_bit:BitConfig"


@pytest.mark.parametrize("dotted, shape, extra", [
    ("convnext.modeling_convnext.ConvNextLayerNorm", [2, 64, 4, 4], {"data_format": "channels_first"}),
    ("squeezebert.modeling_squeezebert.SqueezeBertLayerNorm", [2, 64, 8], {}),
    ("chameleon.modeling_chameleon.ChameleonLayerNorm", [2, 8, 4, 64], {"hidden_size": [4, 64]}),
    ("stablelm.modeling_stablelm.StableLmLayerNormPerHead", [2, 4, 8, 64], {"num_heads": 4}),
    ("detr.modeling_detr.DetrFrozenBatchNorm2d", [2, 64, 4, 4], {"n": 64}),
    ("llama.modeling_llama.LlamaRMSNorm", [2, 8, 64], {"hidden_size": 64}),
])
def test_transformers_layouts(tf, dotted, shape, extra):
    base = synthesize(tf(dotted)).base
    assert base["shape"] == shape
    assert extra.items() <= base["init"].items()


def test_transformers_inputs_and_weights(tf):
    ada = synthesize(tf("qwen2_5_omni.modeling_qwen2_5_omni.Qwen2_5_OmniAdaLayerNormZero")).base
    assert ada["inputs"] == {"emb": {"kind": "normal", "shape": [2, 64]}}
    assert synthesize(tf("qwen3_next.modeling_qwen3_next.Qwen3NextRMSNormGated")).base["inputs"] == {
        "gate": {"kind": "normal"}}
    assert synthesize(tf("esmfold2.modeling_esmfold2.EsmFold2LayerNorm")).base["weight_dtype"] == "float32"
    assert synthesize(tf("detr.modeling_detr.DetrFrozenBatchNorm2d")).base["params"] == {"kind": "ones"}
