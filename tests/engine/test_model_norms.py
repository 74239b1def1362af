"""Which submodules of a live model are norm instances: torch's norms and classes the zoo's rules call norms when
they read their source; blocks named after nothing, and a norm inside a norm, are not instances."""
import importlib.util

import pytest
import torch
from torch import nn

import user_models
from harness.engine.model_norms import class_path, norm_instances


class Wrapped(nn.Module):
    """A user's norm holding torch's: one instance, the outer one."""

    def __init__(self):
        super().__init__()
        self.inner = nn.LayerNorm(8)

    def forward(self, x):
        return self.inner(x)


class WrappedNorm(Wrapped):
    pass


def test_the_user_models_norms_in_model_order():
    found = norm_instances(user_models.TinyMixer(width=8, groups=2))
    assert [(p, class_path(type(m))) for p, m in found] == [
        ("norm_in", "torch.nn.modules.normalization:LayerNorm"),
        ("group", "torch.nn.modules.normalization:GroupNorm"),
        ("norm_out", "user_models:LlamaStyleRMSNorm")]


def test_a_norm_inside_a_norm_is_one_instance_and_a_block_is_none():
    model = nn.Sequential(nn.Linear(8, 8), WrappedNorm(), nn.Dropout(0.0), nn.BatchNorm1d(8))
    assert [p for p, _ in norm_instances(model)] == ["1", "3"]


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="the zoo extra (transformers)")
def test_a_llamas_rmsnorms_are_found_by_their_source():
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, vocab_size=32)
    with torch.random.fork_rng(devices=[]):
        model = LlamaModel(config)
    assert [p for p, _ in norm_instances(model)] == ["layers.0.input_layernorm", "layers.0.post_attention_layernorm",
                                                     "norm"]
