"""Catalog entries of gradient cases (`"grad": true`, docs/gradients.md; cases.bugs appends them to its BUGS).

Each gradient is held to the FP64 reference of the backward lifted from
torch's joint graph with float32 statistics, its running bound and the
correct implementations' witnesses, judged alone (eager is a path like the
others). Shapes are small: a weight or bias gradient has one scored "row"
per element, so its check in a script lists a threshold per element.
"""
from __future__ import annotations

from cases.bug import entry as _bug
from harness.core.verdicts import Verdict

_TVM = "https://github.com/apache/tvm"

_LN_FP16 = {"pattern": "layer_norm", "dtype": "float16", "shape": [64, 64], "grad": True}
_LN_FP32 = {**_LN_FP16, "dtype": "float32"}
_LN_FP16_256 = {"pattern": "layer_norm", "dtype": "float16", "shape": [4, 256], "grad": True}

BUGS = (
    _bug("pytorch-new-cpu-layer-norm-backward-half", None,
         "torch's CPU LayerNorm backward in float16: d_bias (a sum of the cotangent) 26x its bound",
         [_LN_FP16], ["eager"], Verdict.INACCURATE, "reproduced",
         """New (the class of karpathy/llm.c#428 and linkedin/Liger-Kernel#950,
         a parameter gradient accumulated in the low precision, in torch's own
         CPU kernel; none of the reports issue 46 lists is this kernel).
         d_bias is sum(dy) over the 64 rows and needs no statistics: eager errs
         26x its bound (tvm-decompose's float16 sum errs as much), where
         inductor's and executorch's float32 sum rounded once pass (0.23x).
         d_x (9x) and d_weight (20x) are over too; their share is the saved
         statistics (pytorch-new-cpu-layer-norm-half-stats). Not by design:
         native_layer_norm_backward's decomposition sums in float32 and rounds
         once. At float16 [8, 1024] eager's d_bias is 222x its bound.""",
         controls=[(_LN_FP32, "eager")]),
    _bug("pytorch-new-cpu-layer-norm-half-stats", None,
         "torch on CPU saves LayerNorm's mean and rstd in float16: the compiled backward (Inductor) "
         "inherits them, d_x 9x and d_weight 13x their bounds",
         [_LN_FP16], ["inductor"], Verdict.INACCURATE, "reproduced",
         """New, and by design in torch: the CPU native_layer_norm kernel
         returns mean and rstd in the input dtype for float16/bfloat16, and
         its decomposition copies that on CPU for parity (pytorch/pytorch#139923
         asked for the same dtypes everywhere; in pytorch/pytorch#77407 a
         maintainer wrote that low-precision CPU kernels are not fixed in core,
         and that float32 mean/rstd keep layer_norm(half) equal to
         layer_norm(half.float()).half(), backward too), so AOTAutograd's joint graph
         feeds the backward a float16 rstd. normdiff holds gradients to
         float32 statistics (what the CUDA kernels keep; docs/gradients.md),
         so Inductor's float16 d_x and d_weight fail while its d_bias (no
         statistics) passes; eager and executorch's joint graph share it
         (bfloat16 [1024, 64]: d_x 98x on all three). A float32 training step
         passes. Reported as a finding against that design choice, not as a
         kernel bug.""",
         controls=[(_LN_FP32, "inductor")]),
    _bug("tvm-new-gradient-fp16", None,
         "relax.transform.Gradient after DecomposeOpsForTraining differentiates float16 mean/variance "
         "in float16: d_x 75x its bound",
         [_LN_FP16], ["tvm-decompose"], Verdict.INACCURATE, "reproduced",
         """New; the backward face of apache/tvm#20909 (whose report shows the
         forward only). After the pass every op is float16, and Relax's
         registered gradients of variance (2/N x - 2/N^2 sum(x)) and of the
         bias's broadcast add (collapse_sum) take their sums again in float16:
         d_x 75x its bound on float16 [64, 64] where torch's float32 backward
         errs 9x (its float16 statistics), d_bias 26x. Not by design: TOPI's
         own layer_norm upcasts float16 (#14264). The float32 training step
         passes; bfloat16 is refused by Gradient itself.""",
         controls=[(_LN_FP32, "tvm-decompose")]),
    _bug("executorch-new-layer-norm-half-grad", None,
         "A float16 training step on ExecuTorch: the optimized native_layer_norm (rows of 256+) gives "
         "d_x and d_weight thousands of times their bounds",
         [_LN_FP16_256], ["executorch"], Verdict.INACCURATE, "reproduced",
         """New; the gradient face of executorch-new-layer-norm-half. torch's
         joint graph recomputes the forward's native_layer_norm, whose mean and
         rstd feed native_layer_norm_backward (decomposed into float32 ops by
         to_edge); the optimized kernel reads float16 rows of 256 and more as
         float32 bits, so d_x errs 29,000x and d_weight 60,000x their bounds
         on float16 [4, 256], while d_bias (no statistics) passes. The same
         graph run in Python (executorch-recompose) does not have it. Fixing
         the forward kernel fixes this.""",
         controls=[({**_LN_FP16_256, "dtype": "float32"}, "executorch")]),
)
