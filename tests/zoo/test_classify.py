"""Which classes are norms and which are blocks set aside, and by which rule."""
import pytest

from harness.zoo import corpus
from harness.zoo.classify import NORM_NAME, discover


def _verdicts(root):
    found = discover(corpus.load(root=str(root)))
    return {r.name for r in found.norms}, {v.ref.name: v.rule for v in found.set_aside}


def test_the_tiny_library_norms_and_blocks_by_rule(tiny_models):
    norms, aside = _verdicts(tiny_models)
    assert norms == {"AlphaRMSNorm", "AlphaConfigRMSNorm", "AlphaLayerNorm2d", "AlphaGatedRMSNorm",
                     "AlphaSleepyRMSNorm", "AlphaCrashRMSNorm", "BetaRMSNorm", "BetaOtherRMSNorm",
                     "BetaInheritedRMSNorm"}
    assert aside == {"AlphaNormEmbeddings": "name", "AlphaDecoderLayerNorm": "base",
                     "AlphaEncoderLayerNorm": "block", "AlphaNoNorm": "no-norm"}


@pytest.mark.parametrize("name, ok", [
    ("LlamaRMSNorm", True), ("ConvNextLayerNorm", True), ("EomtLayerNorm2d", True),
    ("Qwen3NextRMSNormGated", True), ("NemotronLayerNorm1P", True), ("StableLmLayerNormPerHead", True),
    ("Qwen2_5_OmniAdaLayerNormZero_Final", True), ("DFineConvNormLayer", False),
    ("RobertaPreLayerNormEmbeddings", False), ("Sapiens2ForNormalEstimation", False), ("InklingNormedEmbedding", False),
])
def test_the_norm_name_rule(name, ok):
    assert bool(NORM_NAME.search(name)) is ok


@pytest.fixture(scope="module")
def transformers_found():
    transformers = pytest.importorskip("transformers", reason="the zoo reads transformers: pip install 'normdiff[zoo]'")
    found = discover(corpus.load(package="transformers"))
    return transformers.__version__, found


def test_transformers_norms_and_blocks(transformers_found):
    _, found = transformers_found
    norms = {r.name for r in found.norms}
    aside = {v.ref.name: v.rule for v in found.set_aside}
    assert {"LlamaRMSNorm", "Qwen2RMSNorm", "ConvNextLayerNorm", "T5LayerNorm", "GemmaRMSNorm"} <= norms
    assert aside["RobertaPreLayerNormEmbeddings"] == "name"
    assert aside["DFineConvNormLayer"] == "name"
    assert aside["Wav2Vec2EncoderStableLayerNorm"] == "block"
    assert aside["Wav2Vec2EncoderLayerStableLayerNorm"] == "base"
    assert aside["NoNorm"] == "no-norm"


def test_transformers_5_23_counts(transformers_found):
    version, found = transformers_found
    if version != "5.23.0":
        pytest.skip(f"the counts are transformers 5.23.0's (the zoo extra's pin); installed: {version}")
    rules = {}
    for v in found.set_aside:
        rules[v.rule] = rules.get(v.rule, 0) + 1
    assert (len(found.norms), len(found.set_aside)) == (287, 87)
    assert rules == {"name": 71, "block": 9, "base": 5, "no-norm": 2}
