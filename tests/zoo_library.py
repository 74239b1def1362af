"""A tiny model library on disk (tinylib/models/{alpha,beta}/modeling_*.py), for the zoo's tests.

It is a real package with real torch classes: the AST tests read it (and check that reading it
never put `tinylib` in sys.modules), the probe and CLI tests import it in child processes. The
fixtures `tiny_library` and `tiny_models` (tests/conftest.py) write it into tmp_path.
"""
from __future__ import annotations

import textwrap

ALPHA_CONFIG = '''
class PreTrainedConfig:
    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)


class AlphaConfig(PreTrainedConfig):
    hidden_size: int = 512
    num_attention_heads: int = 8
    rms_norm_eps: float = 1e-6

    def __init__(self, hidden_size=512, num_attention_heads=8, rms_norm_eps=1e-6, **kwargs):
        if hidden_size % num_attention_heads:
            raise ValueError("hidden_size must be divisible by num_attention_heads")
        super().__init__(hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                         rms_norm_eps=rms_norm_eps, **kwargs)


class AlphaVisionConfig(PreTrainedConfig):
    image_size: int = 224
'''

ALPHA = '''
"""The alpha model."""
import os
import time

import torch
from torch import nn

from ...modeling_layers import GradientCheckpointingLayer
from .configuration_alpha import AlphaConfig


class AlphaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps: float = 1e-6):
        """An RMSNorm whose docstring has a line at column zero:
like this one, which ends no statement.
"""
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class AlphaConfigRMSNorm(nn.Module):
    def __init__(self, config: AlphaConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(config.hidden_size))
        self.eps = config.rms_norm_eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class AlphaLayerNorm2d(nn.LayerNorm):
    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = super().forward(x)
        return x.permute(0, 3, 1, 2)


class AlphaGatedRMSNorm(nn.Module):
    def __init__(self, hidden_size, group_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.group_size = group_size
        self.eps = eps

    def forward(self, hidden_states, gate=None):
        h = hidden_states.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        if gate is not None:
            h = h * nn.functional.silu(gate.float())
        return (self.weight * h).to(hidden_states.dtype)


class AlphaNormEmbeddings(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.embed = nn.Embedding(n, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, ids):
        return self.norm(self.embed(ids))


class AlphaEncoderLayerNorm(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.dropout = nn.Dropout(0.1)
        self.norm = nn.LayerNorm(hidden_size)

    def forward(self, x):
        return self.norm(self.dropout(x))


class AlphaDecoderLayerNorm(GradientCheckpointingLayer):
    def forward(self, x):
        return x.mean(-1)


class AlphaNoNorm(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x):
        return x * self.weight


class AlphaSleepyRMSNorm(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()

    def forward(self, x):
        time.sleep(1000)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True))


class AlphaCrashRMSNorm(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        os._exit(3)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True))
'''

# A generated copy: the same RMSNorm under another name, docstring and annotations; one that
# differs in its forward; and one that inherits alpha's through the import.
BETA = '''
#           This file was automatically generated from src/tinylib/models/beta/modular_beta.py.
import torch
import torch.nn as nn

from ..alpha.modeling_alpha import AlphaRMSNorm


class BetaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        """Another docstring."""
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class BetaOtherRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return self.weight * hidden_states * torch.rsqrt(variance + self.variance_epsilon)


class BetaInheritedRMSNorm(AlphaRMSNorm):
    pass
'''

MODULAR_BETA = '''
from ..alpha.modeling_alpha import AlphaRMSNorm


class BetaRMSNorm(AlphaRMSNorm):
    pass
'''

LAYERS = '''
from torch import nn


class GradientCheckpointingLayer(nn.Module):
    pass
'''


def write(root):
    """Write tinylib under `root` (the import root) and return `root`."""
    files = {
        "tinylib/__init__.py": "",
        "tinylib/modeling_layers.py": LAYERS,
        "tinylib/models/__init__.py": "",
        "tinylib/models/alpha/__init__.py": "",
        "tinylib/models/alpha/configuration_alpha.py": ALPHA_CONFIG,
        "tinylib/models/alpha/modeling_alpha.py": ALPHA,
        "tinylib/models/beta/__init__.py": "",
        "tinylib/models/beta/modeling_beta.py": BETA,
        "tinylib/models/beta/modular_beta.py": MODULAR_BETA,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root
