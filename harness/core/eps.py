"""The eps defaults of the norms: one definition of each, imported wherever a default eps is filled in.

Three different things carry the name "default eps", and confusing them
changes a case's arithmetic: torch's own default of its mean-centred norms,
what F.rms_norm does with eps=None, and the default a catalog rms_norm spec
takes when it names no eps.
"""
from __future__ import annotations

TORCH_NORM_EPS = 1e-5
"""torch's default eps of F.layer_norm / F.group_norm / F.batch_norm / F.instance_norm and their nn modules."""

TORCH_RMS_NONE_EPS = 2.0 ** -23
"""What F.rms_norm(eps=None) adds: torch.finfo(float32).eps (its opmath type), for every input dtype."""

SPEC_RMS_EPS = 1e-6
"""A catalog rms_norm spec's default eps: model code's usual one (Llama's, T5's, Qwen's RMSNorm), not torch's."""


def spec_eps(pattern: str) -> float:
    """The eps a catalog spec of `pattern` takes when it names none."""
    return SPEC_RMS_EPS if pattern == "rms_norm" else TORCH_NORM_EPS


def torch_norm_eps(kind: str, eps: float | None) -> float:
    """The eps F.`kind` (layer_norm, rms_norm, group_norm) adds when it is called with `eps` (None: its default)."""
    if eps is not None:
        return eps
    return TORCH_RMS_NONE_EPS if kind == "rms_norm" else TORCH_NORM_EPS
