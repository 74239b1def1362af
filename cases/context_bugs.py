"""Catalog entries of the context suite (cases/neighbours.py): norms in their neighbourhood (cases.bugs appends them).

Each reproduces one triage rule of cases/triage_context.py with the context
suite's own case: the neighbour template around the norm its upstream report
is about, in the dtypes the report shows.
"""
from __future__ import annotations

from cases import neighbours
from cases.bug import entry as _bug
from harness.core.verdicts import Verdict

_ORT = "https://github.com/microsoft/onnxruntime"
_ET = "https://github.com/pytorch/executorch"


def _context(name: str, norm: neighbours.Norm, dtype: str) -> dict:
    return neighbours.spec_of(neighbours.BY_NAME[name], norm, dtype)


_MANUAL = neighbours.Norm("layer_norm", "manual")
_EXPAND_FP16 = _context("scale-expand", _MANUAL, "float16")
_EXPAND_FP32 = _context("scale-expand", _MANUAL, "float32")
_QWEN_EXPAND_FP32 = _context("scale-expand", neighbours.Norm("rms_norm", "qwen", "to"), "float32")

BUGS = (
    _bug("onnxruntime-31980", f"{_ORT}/issues/31980",
         "SimplifiedLayerNormFusion absorbs a following Mul whose scale expands the normalized rows",
         [_EXPAND_FP16, _EXPAND_FP32], ["onnxruntime-fused"], Verdict.ERROR, "reproduced",
         """Open (fix proposed in microsoft/onnxruntime#31990). A layer norm written
         out over rows of one element ([16, 1]), then `* s` with s of shape [64]:
         torch broadcasts to [16, 64]. With every graph optimization on, ONNX
         Runtime 1.32.0 fuses the Mul into a SimplifiedLayerNormalization, whose
         output keeps the input's shape: the session's output becomes [16, ?] and
         the run fails ('Scale and (optional) bias must match X.shape[axis:]').
         The same model with optimizations off passes.""",
         controls=[(_EXPAND_FP16, "onnxruntime"), (_EXPAND_FP32, "onnxruntime")]),
    _bug("executorch-24428-scale-as-weight", f"{_ET}/pull/24428",
         "RecomposeRmsNorm takes the multiply after a weightless RMSNorm for its weight (the review's item 1)",
         [_QWEN_EXPAND_FP32], ["executorch-recompose"], Verdict.ERROR, "reproduced",
         """The PR under review. A Qwen RMSNorm without a weight over rows of one
         element ([16, 1]), then `* s` with s of shape [64] (torch broadcasts to
         [16, 64]): the pass takes `* s` as the norm's weight and rebuilds
         rms_norm(x, [64], s), which fails to run ('Given normalized_shape=[64],
         expected input with shape [*, 64], but got input of size [16, 1]').
         float32, so no dtype change hides it; the portable path passes.""",
         controls=[(_QWEN_EXPAND_FP32, "executorch")]),
)
