"""Catalog entries of the `iree` and `openvino` paths (cases.bugs appends them to its BUGS).

Each reproduces one triage rule of cases/triage_compilers.py with its
simplest nightly case (or the seed), on every CPU: OpenVINO's bf16-precision
findings hold only on CPUs with native bf16 (the baseline's CPU-conditional
entries), so they are documented in docs/findings.md, not checked here.
"""
from __future__ import annotations

from cases.bug import entry as _bug
from cases.suites import SEED_TVM
from harness.core.verdicts import Verdict

_TORCH_MLIR = "https://github.com/llvm/torch-mlir"

_SEED_FP32 = {**SEED_TVM, "dtype": "float32"}
_RMS_FP16 = {"pattern": "rms_norm", "dtype": "float16", "shape": [1, 4096],
             "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0}}
_LN_BF16_PARAMS = {"pattern": "layer_norm", "dtype": "bfloat16", "shape": [2, 64], "params": {"kind": "normal"}}
_LN_F32_PARAMS = {**_LN_BF16_PARAMS, "dtype": "float32"}
_GN_FP16 = {"pattern": "group_norm", "dtype": "float16", "shape": [2, 8, 4, 4], "groups": 4,
            "affine": "weight_bias", "input": {"kind": "constant", "value": 0.1}, "params": {"kind": "normal"}}
_FP16_COPY = {"pattern": "rms_norm", "style": "program", "dtype": "float32", "shape": [4, 64],
              "params": {"kind": "normal"}, "param_shapes": {"w": [64]},
              "program": "h = x.to(torch.float16)\nv = h.pow(2).mean(-1, keepdim=True)\n"
                         "return w * (h * torch.rsqrt(v + eps)).to(torch.float32)"}
_QWEN_BF16_PROGRAM = {"pattern": "rms_norm", "style": "program", "dtype": "bfloat16", "shape": [4, 64],
                      "params": {"kind": "normal"}, "param_shapes": {"w": [64]},
                      "program": "h = x.to(torch.float32)\nv = h.pow(2).mean(-1, keepdim=True)\n"
                                 "return w * (h * torch.rsqrt(v + eps)).to(x.dtype)"}
_GN_MIXED = {"pattern": "group_norm", "dtype": "float16", "weight_dtype": "float32", "shape": [2, 16, 4, 8],
             "groups": 4, "affine": "weight_bias", "params": {"kind": "normal"}}
_IN_PLAIN = {"pattern": "instance_norm", "dtype": "float32", "shape": [2, 8, 64], "affine": "none"}
_BN_FP16 = {"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3], "affine": "weight_bias",
            "params": {"kind": "normal"}}

BUGS = (
    _bug("iree-torch-mlir-2091", f"{_TORCH_MLIR}/pull/2091",
         "torch-mlir's layer_norm decomposition reduces float16 in float16: the TVM seed fails on IREE",
         [SEED_TVM], ["iree"], Verdict.INACCURATE, "reproduced",
         """Open since 2023. iree-turbine hands aten.layer_norm to torch-mlir,
         whose DecomposeComplexOps.cpp takes mean, variance and rsqrt in the
         input dtype: the path's facts show float16 linalg reductions, and the
         seed gives ±1.414 as on tvm-decompose. Its float32 control passes.""",
         controls=[(_SEED_FP32, "iree")]),
    _bug("iree-torch-mlir-4207", f"{_TORCH_MLIR}/pull/4207",
         "torch-mlir's rms_norm decomposition (added without an upcast) squares and sums float16 in float16",
         [_RMS_FP16], ["iree"], Verdict.INACCURATE, "reproduced",
         """nn.RMSNorm in float16 on the seed's ±0.25 rows: float16 reductions
         (facts) where torch's rms_norm accumulates in float32.""",
         controls=[({**_RMS_FP16, "dtype": "float32"}, "iree")]),
    _bug("iree-turbine-1127", "https://github.com/iree-org/iree-turbine/issues/1127",
         "iree-turbine's aot.export cannot inline a bfloat16 parameter (np.array of a bfloat16 tensor)",
         [_LN_BF16_PARAMS], ["iree"], Verdict.ERROR, "reproduced",
         """Open. create_tensor_global calls np.array(tensor), which torch refuses
         for bfloat16 (TypeError: Got unsupported ScalarType BFloat16): no
         bfloat16 module with parameters exports. The float32 module passes.""",
         controls=[(_LN_F32_PARAMS, "iree")]),
    _bug("iree-new-group-norm-fp16", None,
         "torch-mlir's native_group_norm decomposition reduces float16 groups in float16",
         [_GN_FP16], ["iree"], Verdict.INACCURATE, "reproduced",
         """Not reported upstream yet; the group_norm sibling of llvm/torch-mlir#2091
         (DecomposeAtenNativeGroupNormOp in the same file). A constant 0.1 input
         gives a non-zero float16 variance (facts: f16 reductions), so the output
         is far from the bias eager returns.""",
         controls=[({**_GN_FP16, "dtype": "float32"}, "iree")]),
    _bug("iree-new-fp16-mean", None,
         "torch-mlir lowers a float16 mean to a linalg sum accumulating in float16",
         [_FP16_COPY], ["iree"], Verdict.INACCURATE, "reproduced",
         """Not reported upstream yet. A norm of a float16 copy written out with
         .mean() (a float32 model): torch's CPU mean accumulates float16 in
         float32, torch-mlir's reduction in float16 (facts).""",
         controls=[({**_FP16_COPY, "program": _FP16_COPY["program"].replace("float16", "float32")}, "iree")]),
    _bug("iree-new-bf16-arith-constant", None,
         "iree-compile fails on a bfloat16 Qwen-style norm: 'arith.constant' op failed to verify",
         [_QWEN_BF16_PROGRAM], ["iree"], Verdict.ERROR, "reproduced",
         """Not reported upstream yet. A bfloat16 norm with a float32 upcast (and
         bfloat16 layer_norm and batch_norm modules) fails while translating a
         dispatch for llvm-cpu; the float16 program compiles.""",
         controls=[({**_QWEN_BF16_PROGRAM, "dtype": "float32"}, "iree")]),
    _bug("iree-new-group-norm-mixed-cast", None,
         "torch-mlir's group_norm decomposition tensor.casts a float32 weight to float16",
         [_GN_MIXED], ["iree"], Verdict.ERROR, "reproduced",
         """Not reported upstream yet. torch runs a float16 group_norm with
         float32 weights; torch-mlir casts the weight with tensor.cast, which
         cannot change the element type ('cast incompatible').""",
         controls=[({**_GN_MIXED, "dtype": "float32"}, "iree")]),
    _bug("iree-new-instance-norm-none", None,
         "torch-mlir's instance_norm lowering unsqueezes a None weight: no instance norm without affine compiles",
         [_IN_PLAIN], ["iree"], Verdict.ERROR, "reproduced",
         """Not reported upstream yet. 'torch.aten.unsqueeze' op operand #0 must
         be Any Torch tensor type, but got '!torch.none'.""",
         controls=[({**_IN_PLAIN, "affine": "weight_bias"}, "iree")]),
    _bug("openvino-new-mixed-dtype-norm", None,
         "OpenVINO's PyTorch frontend multiplies a float16 normalized value by a float32 weight",
         [_GN_MIXED, {**_GN_MIXED, "pattern": "instance_norm", "groups": 1}], ["openvino"], Verdict.ERROR,
         "reproduced",
         """Not reported upstream yet. group_norm and instance_norm with float32
         weights on a float16 input: element::Type::merge fails at conversion or
         compile; torch runs them.""",
         controls=[({**_GN_MIXED, "dtype": "float32"}, "openvino")]),
    _bug("openvino-new-batch-norm-fp16", None,
         "OpenVINO's float16 eval batch_norm is marginally over the bound (folded scale and shift)",
         [_BN_FP16], ["openvino"], Verdict.INACCURATE, "reproduced",
         """Not reported upstream yet. The runtime model is f16→f32 Converts and
         f32 Eltwise only, so the loss is in the constants folded from the
         running statistics in the model's float16: 1.3x eager's error, over
         the bound.""",
         controls=[({**_BN_FP16, "dtype": "float32"}, "openvino")]),
)
