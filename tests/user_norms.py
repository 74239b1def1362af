"""Norm classes as a user's model code writes them: the module cases' tests import them as `user_norms:NAME`.

tests/ is on the import path of the tests, their workers and (with PYTHONPATH) the command line, as a
user's own folder of classes would be.
"""
import torch
import torch.nn.functional as F
from torch import nn


class LlamaRMSNorm(nn.Module):
    """The Llama/Qwen RMSNorm transformers' 136 classes share: upcast, normalize, cast back, weight."""

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


class GatedRMSNorm(nn.Module):
    """Mamba's gated RMSNorm: the input times silu(gate), normalized."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, hidden_states, gate=None):
        dtype = hidden_states.dtype
        h = hidden_states.to(torch.float32)
        if gate is not None:
            h = h * F.silu(gate.to(torch.float32))
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


class ChannelsFirstLayerNorm(nn.Module):
    """ConvNeXt's channels-first LayerNorm: statistics over dim 1, parameters as [:, None, None]."""

    def __init__(self, channels, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class PerHeadLayerNorm(nn.Module):
    """StableLM's per-head LayerNorm: the heads split off dim 1, one LayerNorm each, joined back by cat."""

    def __init__(self, dim, num_heads, eps=1e-5):
        super().__init__()
        self.norms = nn.ModuleList([nn.LayerNorm(dim, eps=eps, bias=False) for _ in range(num_heads)])

    def forward(self, hidden_states):
        heads = torch.split(hidden_states, 1, dim=1)
        return torch.cat([norm(h) for norm, h in zip(self.norms, heads)], dim=1)


class Float32PinnedLayerNorm(nn.LayerNorm):
    """ESMFold2's LayerNorm: an upcast input with the weights uncast, which the model keeps in float32
    (transformers' _keep_in_fp32_modules_strict); moved to float16 whole, torch refuses it."""

    def forward(self, hidden_states):
        out = F.layer_norm(hidden_states.float(), self.normalized_shape, self.weight, self.bias, self.eps)
        return out.to(hidden_states.dtype)


class ZeroCenteredRMSNorm(nn.Module):
    """Gemma's RMSNorm: * (1 + weight), the weight initialised at 0."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * (1.0 + self.weight.float())).type_as(x)


class Config:
    """A config object, as transformers' norms take one."""

    def __init__(self, hidden_size=32, rms_norm_eps=1e-6):
        self.hidden_size = hidden_size
        self.rms_norm_eps = rms_norm_eps


class ConfiguredRMSNorm(LlamaRMSNorm):
    def __init__(self, config):
        super().__init__(config.hidden_size, config.rms_norm_eps)


class AdaptiveLayerNorm(nn.Module):
    """A DiT-style adaptive norm: scale and shift from a conditioning input through F.linear."""

    def __init__(self, dim, cond_dim):
        super().__init__()
        self.linear = nn.Linear(cond_dim, 2 * dim)
        self.dim = dim

    def forward(self, x, cond):
        scale, shift = self.linear(F.silu(cond)).chunk(2, dim=-1)
        h = F.layer_norm(x, (self.dim,), None, None, 1e-6)
        return h * (1 + scale[:, None]) + shift[:, None]


class CumulativeNorm(nn.Module):
    """A norm over a running product: cumprod is outside the program language."""

    def forward(self, x):
        return x / (x.abs().cumprod(-1) + 1.0)


class DtypeBranchNorm(nn.Module):
    """Computes something else in float64 than in float32: its lift cannot be checked against it."""

    def forward(self, x):
        if x.dtype == torch.float64:
            return x * 2.0
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class CrashingNorm(nn.Module):
    """Kills its process while it is built."""

    def __init__(self):
        super().__init__()
        import os
        import signal

        os.kill(os.getpid(), signal.SIGSEGV)


class HangingNorm(nn.Module):
    def __init__(self):
        super().__init__()
        import time

        time.sleep(3600)


class HungryNorm(nn.Module):
    """Allocates far past any worker's memory limit while it is built (a table sized by a typo)."""

    def __init__(self, hidden_size):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.table = torch.zeros(hidden_size, 2**40)  # 4 TiB of float32

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class NeighbourhoodNorm(nn.Module):
    """A norm with the ops real models put around it: a pool and a nearest upsample, a rotary rotate, a
    projection, a softmax, the activations, a running sum and a clamp (every call op of the language)."""

    def __init__(self, dim=16):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.proj = nn.Parameter(torch.linspace(-0.5, 0.5, dim * dim).reshape(dim, dim))

    def forward(self, x):
        h = F.interpolate(F.avg_pool2d(x, 2), scale_factor=2) + F.max_pool2d(x, 3, stride=1, padding=1)
        h = self.norm(h)
        half = h.shape[-1] // 2
        h = h * 0.5 + torch.cat([-h[..., half:], h[..., :half]], dim=-1) * 0.25
        a = torch.softmax(h @ self.proj, dim=-1)
        g = F.gelu(a) + F.gelu(h, approximate="tanh") + F.elu(h) + F.hardswish(h)
        return (g + g.cumsum(-1) * 0.1).clamp(min=-4.0) * torch.ones_like(g)


class SpatialNorm(nn.Module):
    """Emu3's spatial norm: a group norm modulated by pointwise convolutions of a nearest-upsampled input."""

    def __init__(self, channels=8):
        super().__init__()
        self.norm = nn.GroupNorm(2, channels)
        self.conv_y = nn.Conv2d(channels, channels, kernel_size=1)
        self.conv_b = nn.Conv2d(channels, channels, kernel_size=1)

    def forward(self, x, q):
        q = F.interpolate(q, size=x.shape[-2:], mode="nearest")
        return self.norm(x) * self.conv_y(q) + self.conv_b(q)


class RunningGroupNorm(nn.Module):
    """Gemma 3n's cumulative group norm: statistics over the features so far in time (cumsum, ones_like, clamp)."""

    def forward(self, x):
        h = x.to(torch.float32)
        count = torch.cumsum(torch.ones_like(h).sum(-1, keepdim=True), dim=1).clamp(min=1.0)
        mean = torch.cumsum(h.sum(-1, keepdim=True), dim=1) / count
        var = torch.cumsum(((h - mean) ** 2).sum(-1, keepdim=True), dim=1) / count
        return ((h - mean) * torch.rsqrt(var + 1e-3)).to(x.dtype)


class FusedAddRMSNorm(nn.Module):
    """vLLM's fused residual add + RMSNorm, as its native path writes it: the sum kept in float32 for the
    statistic, returned with the normalized value (two outputs, vllm-project/vllm#52104)."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x, residual):
        orig_dtype = x.dtype
        x = x.to(torch.float32) + residual.to(torch.float32)
        residual = x.to(orig_dtype)
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.variance_epsilon)
        return x.to(orig_dtype) * self.weight, residual


class L2QKNorm(nn.Module):
    """ZAYA's query norm (transformers' ZayaQKNorm, one output): an L2 norm scaled to sqrt(head_dim)."""

    def __init__(self, head_dim: int = 16):
        super().__init__()
        self.scale = head_dim ** 0.5

    def forward(self, x):
        eps = torch.finfo(x.dtype).eps
        return x * (self.scale / x.norm(p=2, dim=-1, keepdim=True).clamp_min(eps))
