"""The input layout a forward shows."""
from harness.zoo import corpus
from harness.zoo.classes import ref_of
from harness.zoo.layout import layout_of


def test_layouts_of_the_tiny_library(tiny_models):
    c = corpus.load(root=str(tiny_models))
    ref = lambda n: ref_of(c, f"tinylib.models.alpha.modeling_alpha.{n}")  # noqa: E731
    assert layout_of(ref("AlphaRMSNorm"), {}).shape == (2, 8, 64)
    assert layout_of(ref("AlphaLayerNorm2d"), {}).shape == (2, 64, 4, 4)
    assert layout_of(ref("AlphaRMSNorm"), {"num_heads": 4}).shape == (2, 4, 8, 64)
    assert layout_of(ref("AlphaRMSNorm"), {"feature_dims": [4]}).shape == (2, 8, 4, 64)
    assert layout_of(ref("AlphaRMSNorm"), {"hidden_size": [4, 64]}).shape == (2, 8, 4, 64)
