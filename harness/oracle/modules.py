"""Torch modules for every norm pattern and style, written as real models write them.

`build_module(spec, params)` returns an eval-mode module whose parameters are
the case's (rounded) parameters. Styles follow their models line by line:
`qwen` is transformers' Qwen2RMSNorm, `llama` Meta's reference RMSNorm, `t5`
T5LayerNorm, `gemma` Gemma's RMSNorm, `upcast` open_clip's LayerNormFp32.
The spec's `cast` says how each upcast and cast back is spelled.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.core.dtypes import torch_dtype
from harness.spec import CaseSpec, program_case
from harness.program import build_program_module, parse
from harness.core.tensors import to_torch


def upcast(x: torch.Tensor, how: str, to: torch.dtype = torch.float32) -> torch.Tensor:
    """x to float32, spelled the way the cast style spells it.

    `to` is float64 only in `float64_twin`, where .float() becomes .double().
    """
    if how == "to":
        return x.to(to)
    if how == "to_contiguous":
        return x.to(to, memory_format=torch.contiguous_format)
    # "float", and "type_as" styles upcast with .float() (Llama, Gemma)
    return x.float() if to == torch.float32 else x.double()


def cast_back(h: torch.Tensor, like: torch.Tensor, dtype: torch.dtype, how: str) -> torch.Tensor:
    """h back to `dtype` (the dtype of `like`), spelled the cast style's way."""
    if how == "type_as":
        return h.type_as(like)
    if how == "to_contiguous":
        return h.to(dtype, memory_format=torch.contiguous_format)
    if how == "float":
        return {torch.float16: h.half, torch.bfloat16: h.bfloat16, torch.float64: h.double}.get(dtype, h.float)()
    return h.to(dtype)


class _Norm(nn.Module):
    """Holds an optional weight/bias and the cast style."""

    up = torch.float32  # what the model upcasts to; float64 only in `float64_twin`

    def __init__(self, spec: CaseSpec):
        super().__init__()
        dim = spec.shape[-1]
        wdt = torch_dtype(spec.weight_dtype)
        self.eps = spec.eps
        self.cast = spec.cast
        self.dim = dim
        self.weight = nn.Parameter(torch.ones(dim, dtype=wdt)) if spec.affine != "none" else None
        self.bias = nn.Parameter(torch.zeros(dim, dtype=wdt)) if spec.affine == "weight_bias" else None


class UpcastLayerNorm(_Norm):
    """open_clip's LayerNormFp32: F.layer_norm on a float32 copy, cast back."""

    def forward(self, x):
        orig_type = x.dtype
        w = upcast(self.weight, self.cast, self.up) if self.weight is not None else None
        b = upcast(self.bias, self.cast, self.up) if self.bias is not None else None
        y = F.layer_norm(upcast(x, self.cast, self.up), (self.dim,), w, b, self.eps)
        return cast_back(y, x, orig_type, self.cast)


class ManualLayerNorm(_Norm):
    """Mean and variance written out, all in the input dtype (as ConvNeXt's channels-first LayerNorm)."""

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt(var + self.eps)
        if self.weight is not None:
            y = y * self.weight
        if self.bias is not None:
            y = y + self.bias
        return y


class QwenRMSNorm(_Norm):
    """transformers' Qwen2RMSNorm."""

    def forward(self, x):
        input_dtype = x.dtype
        hidden_states = upcast(x, self.cast, self.up)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight is None:
            return cast_back(hidden_states, x, input_dtype, self.cast)
        return self.weight * cast_back(hidden_states, x, input_dtype, self.cast)


class LlamaRMSNorm(_Norm):
    """Meta's reference Llama RMSNorm: x.float(), x*x mean, rsqrt, .type_as(x), * weight."""

    def _norm(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = cast_back(self._norm(upcast(x, self.cast, self.up)), x, x.dtype, self.cast)
        if self.weight is None:
            return output
        return output * self.weight


class T5RMSNorm(_Norm):
    """transformers' T5LayerNorm: variance of a float32 copy, scales x, casts to the weight dtype."""

    def forward(self, hidden_states):
        variance = upcast(hidden_states, self.cast, self.up).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight is None:
            return hidden_states
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            hidden_states = cast_back(hidden_states, self.weight, self.weight.dtype, self.cast)
        return self.weight * hidden_states


class GemmaRMSNorm(_Norm):
    """transformers' GemmaRMSNorm: normalize x.float(), * (1 + weight.float()), .type_as(x).

    Gemma multiplies before the cast back, Llama after ("(x * w).to(float16)"
    against "x.to(float16) * w").
    """

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(upcast(x, self.cast, self.up))
        if self.weight is not None:
            output = output * (1.0 + upcast(self.weight, self.cast, self.up))
        return cast_back(output, x, x.dtype, self.cast)


_STYLE_CLASSES = {
    ("layer_norm", "upcast"): UpcastLayerNorm,
    ("layer_norm", "manual"): ManualLayerNorm,
    ("rms_norm", "qwen"): QwenRMSNorm,
    ("rms_norm", "llama"): LlamaRMSNorm,
    ("rms_norm", "t5"): T5RMSNorm,
    ("rms_norm", "gemma"): GemmaRMSNorm,
}


def _torch_module(spec: CaseSpec) -> nn.Module:
    """The torch.nn module of the `module` style."""
    wdt = torch_dtype(spec.weight_dtype)
    affine = spec.affine != "none"
    channels = spec.shape[1] if len(spec.shape) > 1 else spec.shape[0]
    dims = len(spec.shape)
    if spec.pattern == "layer_norm":
        return nn.LayerNorm(spec.shape[-1], eps=spec.eps, elementwise_affine=affine,
                            bias=spec.affine == "weight_bias", dtype=wdt)
    if spec.pattern == "rms_norm":
        return nn.RMSNorm(spec.shape[-1], eps=spec.eps, elementwise_affine=affine, dtype=wdt)
    if spec.pattern == "group_norm":
        return nn.GroupNorm(spec.groups, channels, eps=spec.eps, affine=affine, dtype=wdt)
    if spec.pattern == "instance_norm":
        cls = {3: nn.InstanceNorm1d, 4: nn.InstanceNorm2d, 5: nn.InstanceNorm3d}[dims]
        return cls(channels, eps=spec.eps, affine=affine, dtype=wdt)
    if spec.pattern == "batch_norm":
        cls = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}[dims]
        return cls(channels, eps=spec.eps, affine=affine, dtype=wdt)
    raise ValueError(spec.pattern)  # pragma: no cover


def build_module(spec: CaseSpec, params: dict[str, np.ndarray]) -> nn.Module:
    """The eval-mode torch module of `spec` holding exactly `params`."""
    if spec.program is not None:
        return build_program_module(parse(spec.program, case=program_case(spec)), program_case(spec), params)
    if spec.style == "module":
        module = _torch_module(spec)
    else:
        module = _STYLE_CLASSES[(spec.pattern, spec.style)](spec)
    with torch.no_grad():
        for name, value in params.items():
            target = getattr(module, name)
            target.copy_(to_torch(value))
    return module.eval()


def float64_twin(module: nn.Module) -> nn.Module:
    """A float64 copy running the same model code, its upcasts going to float64.

    Tests compare the FP64 reference against it: the module's own arithmetic
    (Gemma's 1 + w, T5's cast order, batch_norm's running statistics) done
    by torch instead of by the reference's NumPy formulas.
    """
    twin = copy.deepcopy(module).double()
    for m in twin.modules():
        if isinstance(m, _Norm):
            m.up = torch.float64
    return twin
