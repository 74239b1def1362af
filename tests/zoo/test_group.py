"""Grouping by implementation: the same code up to class names, docstrings and annotations."""
import pytest

from harness.zoo import corpus
from harness.zoo.classify import discover
from harness.zoo.group import group


def _groups(root):
    impls = group(discover(corpus.load(root=str(root))).norms)
    return {i.representative.name: [m.name for m in i.members] for i in impls}


def test_copies_group_together_and_a_different_forward_does_not(tiny_models):
    groups = _groups(tiny_models)
    # BetaRMSNorm differs from AlphaRMSNorm only in names, docstrings and annotations; BetaInheritedRMSNorm
    # inherits alpha's code; AlphaRMSNorm is the representative (the modular file copies from it)
    assert groups["AlphaRMSNorm"] == ["AlphaRMSNorm", "BetaInheritedRMSNorm", "BetaRMSNorm"]
    assert groups["BetaOtherRMSNorm"] == ["BetaOtherRMSNorm"]
    assert len(groups) == 7


def test_grouping_is_deterministic(tiny_models):
    assert _groups(tiny_models) == _groups(tiny_models)


def test_transformers_shared_rmsnorm_is_one_implementation():
    pytest.importorskip("transformers", reason="the zoo reads transformers: pip install 'normdiff[zoo]'")
    impls = group(discover(corpus.load(package="transformers")).norms)
    by_member = {m.name: i for i in impls for m in i.members}
    llama = by_member["LlamaRMSNorm"]
    assert by_member["Qwen2RMSNorm"] is llama and by_member["MistralRMSNorm"] is llama
    assert llama.representative.name == "LlamaRMSNorm"
    assert len(llama.members) > 100
    # Gemma's (1 + weight) and Llama4's L2 norm are other implementations
    assert by_member["GemmaRMSNorm"] is not llama and by_member["Llama4TextL2Norm"] is not llama
    assert sum(len(i.members) for i in impls) == len(by_member)
