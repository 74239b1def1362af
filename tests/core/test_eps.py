"""The eps defaults against torch's own: its modules' signatures and what F.rms_norm(eps=None) computes."""
import inspect

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from harness.core.eps import SPEC_RMS_EPS, TORCH_NORM_EPS, TORCH_RMS_NONE_EPS, spec_eps, torch_norm_eps


@pytest.mark.parametrize("fn", [F.layer_norm, F.group_norm, F.batch_norm, F.instance_norm])
def test_torch_norm_eps_is_the_functionals_default(fn):
    assert inspect.signature(fn).parameters["eps"].default == TORCH_NORM_EPS


@pytest.mark.parametrize("cls", [nn.LayerNorm, nn.GroupNorm, nn.BatchNorm1d, nn.BatchNorm2d, nn.InstanceNorm2d])
def test_torch_norm_eps_is_the_modules_default(cls):
    assert inspect.signature(cls).parameters["eps"].default == TORCH_NORM_EPS


def test_rms_none_eps_is_what_rms_norm_adds():
    # a row of zeros but one tiny value: the output is x / sqrt(mean(x^2) + eps), so eps shows in it
    # (float32 and bfloat16 inputs: both compute in float32)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.zeros(1, 4, dtype=dtype)
        x[0, 0] = 2.0 ** -12
        got = F.rms_norm(x, (4,), eps=None)[0, 0].double().item()
        want = 2.0 ** -12 / np.sqrt(2.0 ** -24 / 4 + TORCH_RMS_NONE_EPS)
        assert got == pytest.approx(want, rel=1e-2 if dtype == torch.bfloat16 else 1e-6)
        assert got != pytest.approx(2.0 ** -12 / np.sqrt(2.0 ** -24 / 4 + TORCH_NORM_EPS), rel=1e-2)
    assert TORCH_RMS_NONE_EPS == torch.finfo(torch.float32).eps


def test_spec_eps_and_torch_norm_eps():
    assert spec_eps("rms_norm") == SPEC_RMS_EPS and spec_eps("layer_norm") == TORCH_NORM_EPS
    assert spec_eps("group_norm") == TORCH_NORM_EPS
    assert torch_norm_eps("rms_norm", None) == TORCH_RMS_NONE_EPS
    assert torch_norm_eps("layer_norm", None) == TORCH_NORM_EPS
    assert torch_norm_eps("rms_norm", 0.5) == 0.5 and torch_norm_eps("group_norm", 0.0) == 0.0
