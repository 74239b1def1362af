"""Bases followed through the corpus, torch bases named."""
from harness.zoo import corpus
from harness.zoo.classes import candidates, ref_of


def test_lineage_and_torch_bases(tiny_models):
    c = corpus.load(root=str(tiny_models))
    inherited = ref_of(c, "tinylib.models.beta.modeling_beta.BetaInheritedRMSNorm")
    assert [r.name for r in inherited.lineage] == ["BetaInheritedRMSNorm", "AlphaRMSNorm"]
    assert inherited.is_module and inherited.torch_norm is None
    assert inherited.method("forward")[0].name == "AlphaRMSNorm"
    ln2d = ref_of(c, "tinylib.models.alpha.modeling_alpha.AlphaLayerNorm2d")
    assert ln2d.torch_norm == "torch.nn.LayerNorm" and ln2d.method("__init__") is None
    layer = ref_of(c, "tinylib.models.alpha.modeling_alpha.AlphaDecoderLayerNorm")
    assert not layer.is_module


def test_candidates_are_read_from_headers(tiny_models):
    names = {r.name for r in candidates(corpus.load(root=str(tiny_models)))}
    assert "BetaInheritedRMSNorm" in names and "AlphaNoNorm" in names and "PreTrainedConfig" not in names
