"""Constructor parameters, torch's own where the class hands them on."""
import pytest

from harness.zoo import corpus
from harness.zoo.classes import ref_of
from harness.zoo.signature import MISSING, forward_params, init_params


def test_a_class_without_a_constructor_takes_torchs(tiny_models):
    ref = ref_of(corpus.load(root=str(tiny_models)), "tinylib.models.alpha.modeling_alpha.AlphaLayerNorm2d")
    params = init_params(ref)
    assert [p.name for p in params] == ["normalized_shape", "eps", "elementwise_affine", "bias"]
    assert params[0].default is MISSING and params[1].default == 1e-5


def test_forward_params_after_the_input(tiny_models):
    ref = ref_of(corpus.load(root=str(tiny_models)), "tinylib.models.alpha.modeling_alpha.AlphaGatedRMSNorm")
    assert [(p.name, p.default) for p in forward_params(ref)] == [("gate", None)]


def test_transformers_pass_through_drops_what_the_class_already_fills():
    pytest.importorskip("transformers", reason="the zoo reads transformers: pip install 'normdiff[zoo]'")
    c = corpus.load(package="transformers")
    pool = ref_of(c, "transformers.models.poolformer.modeling_poolformer.PoolFormerGroupNorm")
    assert [p.name for p in init_params(pool)] == ["num_channels", "eps", "affine"]  # super().__init__(1, num_channels, **kw)
    convnext = ref_of(c, "transformers.models.convnext.modeling_convnext.ConvNextLayerNorm")
    assert [p.name for p in init_params(convnext)] == ["normalized_shape", "eps", "data_format", "elementwise_affine", "bias"]
