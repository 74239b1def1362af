"""The lift check: the module itself run in float64 holds its own arithmetic, F.rms_norm's eps=None included."""
import numpy as np
import torch

from harness.core.eps import TORCH_RMS_NONE_EPS
from harness.engine.cases import Cases
from harness.modules.lift_check import module_float64
from harness.spec import CaseSpec


def test_rms_norms_default_eps_stays_float32s_in_the_float64_run():
    """nn.RMSNorm() adds torch.finfo(float32).eps in every dtype; its float64 copy must too (float64's eps gave a
    float32 case a lift check at 0.07x its bound: an `error` of a right lift)."""
    x = torch.full((1, 4), 1e-4, dtype=torch.float64)
    out, why = module_float64(torch.nn.RMSNorm(4), [x])
    assert why is None
    assert np.allclose(out, 1e-4 / np.sqrt(1e-8 + TORCH_RMS_NONE_EPS), rtol=1e-12)
    spec = CaseSpec.from_dict({"class": "torch.nn:RMSNorm", "init": {"normalized_shape": 16}, "dtype": "float32",
                               "shape": [2, 13, 16]})
    setup = Cases().setup(spec)
    assert setup.problem is None and setup.lift.lift_check < 1e-12
