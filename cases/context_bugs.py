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
_QWEN = neighbours.Norm("rms_norm", "qwen", "to")
_QWEN_EXPAND_FP32 = _context("scale-expand", _QWEN, "float32")
_TANH_GELU_FP32 = _context("gelu-tanh-after", _QWEN, "float32")
_QK_FP16 = _context("qk-scores", neighbours.Norm("layer_norm", "module"), "float16")

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
    _bug("executorch-22851-xnnpack-tanh-gelu", f"{_ET}/pull/22851",
         "XNNPACK runs gelu(approximate='tanh') as exact GELU",
         [_TANH_GELU_FP32], ["executorch-xnnpack"], Verdict.INACCURATE, "reproduced",
         """Fixed upstream by pytorch/executorch#22851, not in executorch 1.5.1.
         The partitioner's GeluConfig delegates any float32 aten.gelu and
         op_gelu.py serializes it as XNNGelu, the erf form, whatever its
         `approximate`: a Qwen RMSNorm then gelu(approximate='tanh') is off by
         up to 4.67e-4, max |gelu_erf - gelu_tanh| (4.73e-4 at x = -2.70). The
         portable path passes.""",
         controls=[(_TANH_GELU_FP32, "executorch")]),
    _bug("iree-new-gelu-tanh-constant", None,
         "torch-mlir's gelu(approximate='tanh') lowering writes sqrt(2/pi) as 0.797724",
         [_TANH_GELU_FP32], ["iree"], Verdict.INACCURATE, "reproduced",
         """New. torch-mlir's TorchToLinalg payload for the tanh form
         (llvm/torch-mlir#2941) multiplies by 0.797724 (the linalg IR
         iree-compile --compile-to=input prints: arith.constant 7.977240e-01);
         sqrt(2/pi) is 0.7978846. The 2.0e-4 relative error in tanh's argument
         gives up to 5.12e-5 absolute near x = 1.33 (NumPy: 5.118e-5; IREE 3.13
         on gelu alone over [-12, 12]: 5.128e-5; the same formula written out
         with the right constant: 8e-7). The erf form is not affected.""",
         controls=[(_TANH_GELU_FP32, "eager")]),
    _bug("tvm-new-matmul-float32-out", None,
         "from_exported_program imports a float16/bfloat16 matmul with out_dtype='float32'",
         [_QK_FP16], ["tvm"], Verdict.DTYPE_MISMATCH, "reproduced",
         """New. The importer maps matmul.default, mm.default and bmm.default to
         relax.op.linear_algebra.matmul(..., out_dtype="float32"), hard-coded as
         in its _linear and _addmm (apache-tvm 0.27): attention scores n @ n^T
         after a float16 layer norm return float32 where torch returns
         float16. The values are within the bound.""",
         controls=[(_QK_FP16, "eager")]),
)
