"""The upstream classes the catalog styles follow, verbatim (transformers, Meta Llama, open_clip): the independent check.

harness/program/styles.py defines each style once, as its program, and
everything normdiff runs is rendered from it; these copies are what the
tests hold those programs to, bit for bit. `upstream(style, …)` builds one
holding given parameters; a case without a weight gets the neutral one its
class multiplies by (ones in a dtype that changes nothing, Gemma's zeros).
The `manual` style has no upstream class: `manual_layer_norm` is the
textbook formula written out in torch.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from harness.core.tensors import to_torch


class Qwen2RMSNorm(nn.Module):
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


class MetaLlamaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class GemmaRMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float())
        output = output * (1.0 + self.weight.float())
        return output.type_as(x)


class LayerNormFp32(nn.LayerNorm):
    def forward(self, x):
        orig_type = x.dtype
        x = F.layer_norm(x.to(torch.float32), self.normalized_shape, self.weight, self.bias, self.eps)
        return x.to(orig_type)


UPSTREAM = {"qwen": Qwen2RMSNorm, "llama": MetaLlamaRMSNorm, "t5": T5LayerNorm, "gemma": GemmaRMSNorm,
            "upcast": LayerNormFp32}


def manual_layer_norm(x, weight, bias, eps):
    """Mean and (biased) variance in the input's dtype, then (x - mean) / sqrt(var + eps), * weight, + bias."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _neutral(style: str, dim: int, x_dtype: str) -> torch.Tensor:
    """The weight an upstream class multiplies by for a case without one: it changes no bit and no dtype."""
    if style == "gemma":
        return torch.zeros(dim)  # * (1 + 0)
    return torch.ones(dim, dtype=torch.float32 if style == "t5" else getattr(torch, x_dtype))


def upstream(style: str, dim: int, eps: float, x_dtype: str, weight_dtype: str, weight=None, bias=None):
    """The eval-mode upstream module of `style` holding `weight` and `bias` (NumPy arrays, or None)."""
    if style == "upcast":
        module = LayerNormFp32(dim, eps=eps, elementwise_affine=weight is not None, bias=bias is not None)
        module = module.to(getattr(torch, weight_dtype))
    else:
        module = UPSTREAM[style](dim, eps=eps)
        with torch.no_grad():
            if weight is None:
                neutral = _neutral(style, dim, x_dtype)
                module.weight = nn.Parameter(neutral)
            else:
                module = module.to(getattr(torch, weight_dtype))
    with torch.no_grad():
        for name, value in (("weight", weight), ("bias", bias)):
            if value is not None:
                getattr(module, name).copy_(to_torch(value))
    return module.eval()
