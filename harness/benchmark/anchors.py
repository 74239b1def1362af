"""The anchors' oracles, each applied to the same outputs as its project applies it.

Each oracle takes (actual, eager, fp64) NumPy arrays and says whether it flags
`actual`. The reference the anchors compare against is eager's output, as
each project compares a backend against a reference run; torch._dynamo's
check also gets the FP64 result, as its accuracy checker computes one.

* `assert_close`: torch.testing.assert_close(actual, eager), per-dtype
  default rtol/atol, dtype checked.
* `dynamo_same`: torch._dynamo.utils.same(ref=eager, res=actual,
  fp64_ref=fp64), its defaults: allclose(1e-4) first, then pass if
  RMSE(res, fp64) <= multiplier * RMSE(eager, fp64) + tol/10, the multiplier
  2 (3 for float16/bfloat16 results or fewer than 1000 elements).
* `nnsmith`: nnsmith.difftest.assert_allclose as its backend factory's
  verify_results calls it: numpy.testing.assert_allclose(actual, oracle,
  rtol=1e-2, atol=1e-3, equal_nan=True) (dtype not checked; bfloat16 goes to
  NumPy as float32, NumPy having no bfloat16 of its own).
* `polygraphy`: polygraphy.comparator.SimpleCompareFunc with its defaults
  (what CompareFunc.simple() builds: rtol=atol=1e-5, elementwise; an element
  fails only if over both), the output under test first and the reference
  second, as `polygraphy run --trt --onnxrt` orders them.
* `executorch`: executorch.backends.test.harness.Tester._compare_outputs
  (reference=eager, stage output=actual, atol=rtol=1e-3): shape check, then
  torch.allclose(..., equal_nan=True), which raises on a dtype mismatch.
"""
from __future__ import annotations

import numpy as np
import torch

from harness.core.tensors import to_torch


def _t(a: np.ndarray) -> torch.Tensor:
    return to_torch(np.asarray(a))


def assert_close(actual, eager, fp64) -> bool:
    try:
        torch.testing.assert_close(_t(actual), _t(eager))
    except AssertionError:
        return True
    return False


def dynamo_same(actual, eager, fp64) -> bool:
    from torch._dynamo.utils import same

    return not same(_t(eager), _t(actual), fp64_ref=torch.from_numpy(np.ascontiguousarray(fp64)),
                    log_error=lambda *a, **k: None)


def _float(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def nnsmith(actual, eager, fp64) -> bool:
    try:
        # verbose=False only spares printing the arrays into the message; the check is the same
        np.testing.assert_allclose(_float(actual), _float(eager), rtol=1e-2, atol=1e-3, equal_nan=True,
                                   verbose=False)
    except AssertionError:
        return True
    return False


_POLYGRAPHY = None


def polygraphy(actual, eager, fp64) -> bool:
    global _POLYGRAPHY
    from polygraphy.comparator import IterationResult
    from polygraphy.comparator.compare import SimpleCompareFunc

    if _POLYGRAPHY is None:
        from polygraphy.logger import G_LOGGER

        G_LOGGER.module_severity = G_LOGGER.CRITICAL  # its per-output log lines would swamp the table
        _POLYGRAPHY = SimpleCompareFunc()
    # NumPy arrays as Polygraphy's runners return them; where bfloat16 is involved, which its
    # NumPy path cannot take, both as torch tensors (its torch path)
    as_torch = "bfloat16" in (actual.dtype.name, eager.dtype.name)

    def arg(a):
        return _t(a) if as_torch else np.asarray(a)

    # Its statistics of the difference (mean, median, histogram) meet the inf and NaN a wrong implementation gives:
    # NumPy's "invalid value" warnings, which would print in make test's output; its verdict is the same without them
    with np.errstate(invalid="ignore"):
        results = _POLYGRAPHY(IterationResult({"y": arg(actual)}, runner_name="actual"),
                              IterationResult({"y": arg(eager)}, runner_name="eager"))
    return not all(bool(v) for v in results.values()) or not results


def executorch(actual, eager, fp64) -> bool:
    from executorch.backends.test.harness.tester import Tester

    try:
        Tester._compare_outputs(_t(eager), _t(actual), atol=1e-3, rtol=1e-3)
    except (AssertionError, RuntimeError):
        return True
    return False


ANCHORS = {
    "torch.testing.assert_close": assert_close,
    "torch._dynamo.utils.same": dynamo_same,
    "NNSmith allclose(1e-2, 1e-3)": nnsmith,
    "Polygraphy CompareFunc.simple": polygraphy,
    "ExecuTorch Tester (1e-3)": executorch,
}
