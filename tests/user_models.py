"""Whole models as a user's code writes them: `normdiff model`'s tests import them as `user_models:NAME`.

tests/ is on the import path of the tests, their workers and (with PYTHONPATH) the command line.
"""
import torch
from torch import nn


class LlamaStyleRMSNorm(nn.Module):
    """Llama's RMSNorm: upcast, normalize, cast back, weight."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class TinyMixer(nn.Module):
    """(batch, tokens, width) -> the same, a residual stream read by three norms, in this order: a LayerNorm before
    a Linear, a GroupNorm over the width as channels, and a Llama-style RMSNorm at the end."""

    def __init__(self, width=32, groups=4):
        super().__init__()
        self.norm_in = nn.LayerNorm(width)
        self.proj = nn.Linear(width, width)
        self.group = nn.GroupNorm(groups, width)
        self.norm_out = LlamaStyleRMSNorm(width)

    def forward(self, x):
        h = x + self.proj(self.norm_in(x))
        h = h + self.group(h.transpose(1, 2)).transpose(1, 2)
        return self.norm_out(h)


def tiny_mixer(width=32):
    """A factory: the model, built by a function."""
    return TinyMixer(width=width)


class TinyRMSStack(nn.Module):
    """(batch, tokens, width) -> the same: a pre-norm residual block and a final norm as Llama writes them, with
    torch's own nn.RMSNorm (whose float16 kernel upcasts in eager) instead of a hand-written one."""

    def __init__(self, width=16):
        super().__init__()
        self.norm_1 = nn.RMSNorm(width)
        self.proj = nn.Linear(width, width)
        self.norm_f = nn.RMSNorm(width)

    def forward(self, x):
        h = x + self.proj(self.norm_1(x))
        return self.norm_f(h)
