"""The torch module of every case: the one every path exports and eager runs.

`build_module(spec, params)` returns an eval-mode module whose parameters are
the case's (rounded) parameters. A catalog layer_norm or rms_norm case (every
hand-written style, and the `module` style as F.layer_norm / F.rms_norm) runs
its style's program, harness.program.styles being the one definition of each
style: `qwen` is transformers' Qwen2RMSNorm, `llama` Meta's reference RMSNorm,
`t5` T5LayerNorm, `gemma` Gemma's RMSNorm, `upcast` open_clip's
LayerNormFp32, line for line (tests/oracle/test_modules.py checks each bit
for bit against a verbatim copy of its upstream class), with the spec's
`cast` spelling each upcast and cast back. group_norm, instance_norm and
batch_norm, which have no program, are torch's own modules. A program case
runs its program.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from harness.core.dtypes import torch_dtype
from harness.core.tensors import to_torch
from harness.oracle.twins import PROGRAM_NAMES, parsed_style_case
from harness.program import build_program_module
from harness.program.styles import STYLE_INPUTS
from harness.program.torch_module import TorchWalker
from harness.spec import CaseSpec, program_case


class _Float64Walker(TorchWalker):
    """The float64 twin's walk: every tensor is float64, so every cast (up or back) goes to float64."""

    def cast(self, node, t, dtype, like):
        return t.double()


class StyleModule(nn.Module):
    """A catalog style: its program walked with the very torch calls model code makes (ProgramModule's walk).

    The parameters carry torch's norm names (`weight`, `bias`; the program
    reads them as w and b), so state dicts and exported graphs read as a
    norm module's.
    """

    walker = TorchWalker  # float64_twin: _Float64Walker

    def __init__(self, spec: CaseSpec):
        super().__init__()
        self.program, case = parsed_style_case(spec)  # checked against the case's shapes and dtypes
        self.eps = float(case.eps)
        wdt = torch_dtype(spec.weight_dtype)
        dim = spec.shape[-1]
        self.weight = nn.Parameter(torch.ones(dim, dtype=wdt)) if "w" in self.program.params else None
        self.bias = nn.Parameter(torch.zeros(dim, dtype=wdt)) if "b" in self.program.params else None

    def forward(self, x):
        env = {"x": x, "eps": self.eps}
        for attr, name in PROGRAM_NAMES.items():
            if getattr(self, attr) is not None:
                env[name] = getattr(self, attr)
        return self.walker(env).run(self.program)


class _InputArg(StyleModule):
    def forward(self, input):  # noqa: A002 - nn.LayerNorm's name for it
        return super().forward(input)


class _HiddenStatesArg(StyleModule):
    def forward(self, hidden_states):
        return super().forward(hidden_states)


# By what the model calls its input (STYLE_INPUTS; torch.export keeps the name: the graph's placeholder).
_BY_INPUT = {"x": StyleModule, "input": _InputArg, "hidden_states": _HiddenStatesArg}


def _torch_module(spec: CaseSpec) -> nn.Module:
    """torch's own module of a `module` style case without a program (group, instance, batch norm)."""
    wdt = torch_dtype(spec.weight_dtype)
    affine = spec.affine != "none"
    channels = spec.shape[1] if len(spec.shape) > 1 else spec.shape[0]
    dims = len(spec.shape)
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
        return build_program_module(spec.parsed_program, program_case(spec), params)
    if spec.pattern in ("layer_norm", "rms_norm"):
        module = _BY_INPUT[STYLE_INPUTS.get((spec.pattern, spec.style), "x")](spec)
    else:
        module = _torch_module(spec)
    with torch.no_grad():
        for name, value in params.items():
            getattr(module, name).copy_(to_torch(value))
    return module.eval()


def float64_twin(module: nn.Module) -> nn.Module:
    """A float64 copy running the same model code, its upcasts and casts back going to float64.

    Tests compare the FP64 reference against it: the module's own arithmetic
    (Gemma's 1 + w, T5's cast order, batch_norm's running statistics) done
    by torch instead of by the reference's NumPy formulas.
    """
    twin = copy.deepcopy(module).double()
    for m in twin.modules():
        if isinstance(m, StyleModule):
            m.walker = _Float64Walker
    return twin
