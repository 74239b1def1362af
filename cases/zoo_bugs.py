"""The zoo's findings (harness/zoo: transformers' own norm classes as module cases): catalog entries.

Each was found by the zoo suite, confirmed with the raw libraries by its
standalone `normdiff repro` script, and re-checked against the upstream
source. Most name the shipped class (a module spec), so `normdiff bugs
--check` needs transformers for them and skips them without it; a finding a
plain catalog or program case shows as well is written as one.
"""
from __future__ import annotations

from cases.bug import entry as _bug
from harness.core.verdicts import Verdict
from harness.spec import input_of

# The zoo's module specs (harness/zoo: transformers 5.23's classes as `normdiff zoo list` builds them).
_ZOO = "transformers.models"
_FALCON_GATED = {"pattern": "rms_norm", "class": f"{_ZOO}.falcon_h1.modeling_falcon_h1:FalconH1RMSNormGated",
                 "init": {"eps": 1e-06, "hidden_size": 64}, "dtype": "float32", "shape": [2, 8, 64],
                 "params": {"kind": "normal"}, "inputs": {"gate": {"kind": "normal"}}}
_LLAMA_ZOO = {"pattern": "rms_norm", "class": f"{_ZOO}.llama.modeling_llama:LlamaRMSNorm",
              "init": {"eps": 1e-06, "hidden_size": 64}, "dtype": "float32", "shape": [2, 8, 64],
              "params": {"kind": "normal"}}
_FLOW_LN = {"pattern": "layer_norm",
            "class": f"{_ZOO}.gradium_phonon_tts.modeling_gradium_phonon_tts:GradiumPhononTTSFlowLayerNorm",
            "init": {"eps": 1e-05, "normalized_shape": 64}, "dtype": "float16", "shape": [2, 8, 64],
            "params": {"kind": "normal"}, "input": input_of("outlier")}
_MAMBA_GATED = {"pattern": "rms_norm", "class": f"{_ZOO}.mamba2.modeling_mamba2:MambaRMSNormGated",
                "init": {"eps": 1e-06, "group_size": 16, "hidden_size": 64}, "dtype": "float32", "shape": [2, 8, 64],
                "params": {"kind": "normal"}, "inputs": {"gate": {"kind": "normal"}}}
_ADA_FINAL = {"pattern": "layer_norm",
              "class": f"{_ZOO}.qwen2_5_omni.modeling_qwen2_5_omni:Qwen2_5_OmniAdaLayerNormZero_Final",
              "init": {"dim": 64}, "dtype": "float16", "shape": [2, 8, 64], "params": {"kind": "normal"},
              "inputs": {"emb": {"kind": "normal", "shape": [2, 64]}}}
_LINEAR_FP16 = {"pattern": "program", "dtype": "float16", "shape": [2, 64], "params": {"kind": "normal"},
                "param_shapes": {"lw": [128, 64], "lb": [128]}, "program": "return F.linear(x, lw, lb)"}
_SQRT_INF = {"pattern": "program", "dtype": "float16", "shape": [2, 64], "input": {"kind": "constant", "value": 300.0},
             "program": "return torch.reciprocal(torch.sqrt(x * x))"}
_GN_BF16 = {"pattern": "group_norm", "dtype": "bfloat16", "shape": [2, 8, 4, 4], "groups": 4,
            "params": {"kind": "normal"}}
_LN_AFFINE_FP16 = {"pattern": "layer_norm", "dtype": "float16", "shape": [2, 4, 4, 64], "params": {"kind": "normal"},
                   "program": "return F.layer_norm(x, (64,), w, b, eps)"}


BUGS = (
    _bug("tvm-new-bf16-group-norm", None,
         "relax.nn.group_norm rejects bfloat16 when imported: 'expects that data must be float'",
         [_GN_BF16], ["tvm", "tvm-decompose-inference"], Verdict.ERROR, "reproduced",
         """Not reported upstream yet; found by the zoo (BitGroupNormActivation in
         bfloat16). from_exported_program builds R.nn.group_norm, whose
         struct-info inference checks dtype.MatchesCode(kDLFloat); bfloat16
         carries its own code kDLBfloat, so a bfloat16 GroupNorm with affine
         parameters fails at import (TypeError), the accident of
         tvm-new-bf16-power. TOPI group_norm.h would refuse it next ('only
         support float32 and float16'): a missing feature that fails loudly.""",
         controls=[({**_GN_BF16, "dtype": "float16"}, "tvm")]),
    _bug("tvm-new-fp16-norm-affine", None,
         "TOPI layer_norm/group_norm round the normalized value to float16 before the weight and bias",
         [_LN_AFFINE_FP16], ["tvm", "tvm-decompose-inference"], Verdict.INACCURATE, "reproduced",
         """Not reported upstream yet; found by the zoo (DINOv3ConvNextLayerNorm,
         BitGroupNormActivation, SamLayerNorm's family in float16). Since
         apache/tvm#14264, layer_norm.h and group_norm.h take the statistics in
         float32, then Cast the normalized value to float16, multiply gamma and
         add beta in float16: three roundings where eager rounds the affine
         once (TVM's output equals that three-rounding chain on every element,
         checked bit for bit). Within the bound (0.5-0.7x), but where weight *
         z and bias cancel the error is 86-465 float16 ulps against eager's
         0.5: the program rule flags it, the catalog comparator (per unit of
         |w|(kappa + |z|)) passes the same layer_norm.""",
         controls=[({**_LN_AFFINE_FP16, "dtype": "float32"}, "tvm")]),
    _bug("onnxruntime-22557-silu-gate", "https://github.com/microsoft/onnxruntime/issues/22557",
         "The CPU provider's Sigmoid is accurate in absolute, not relative, terms: float32 silu-gated RMSNorms",
         [_FALCON_GATED], ["onnxruntime", "onnxruntime-fused"], Verdict.INACCURATE, "reproduced",
         """Open (the report: Sigmoid(-18) returns -6e-8). MLAS computes the
         logistic with Eigen's rational polynomial, accurate to about 1e-7
         absolute: relative errors of 1e-5 (160 float32 ulps) at x in [-5, 0],
         up to 99 % near -16 (torch: 2 ulps). A silu(gate) of a float32 gated
         RMSNorm (FalconH1, Mamba, Qwen3-Next, GLM-5) exported by torch.onnx as
         x * Sigmoid(x) carries it to the output: ~20 float32 ulps, beyond
         what correct float32 implementations achieve on those rows.""",
         controls=[(_LLAMA_ZOO, "onnxruntime")]),
    _bug("executorch-new-recompose-grouped", None,
         "RecomposeRmsNorm rebuilds a grouped RMSNorm with the weight's shape as normalized_shape: it fails to run",
         [_MAMBA_GATED, {**_MAMBA_GATED, "dtype": "bfloat16"}], ["executorch-recompose"], Verdict.ERROR,
         "reproduced",
         """New; found by the zoo (MambaRMSNormGated, Mamba2's gated norm with
         group_size 16 of 64 channels, and the classes sharing it). The norm
         views x as [..., 4, 16], normalizes each group and views back before
         multiplying the [64] weight; the pass matches pow/mean/rsqrt/mul on
         the grouped view and rebuilds rms_norm(view, [64], weight): 'Given
         normalized_shape=[64], expected input with shape [*64], but got input
         of size [2, 8, 4, 16]', in every dtype. PR #24428's checks (scaled is
         squared, pow 2, casts) do not look at the normalized dim either.""",
         controls=[(_LLAMA_ZOO, "executorch-recompose")]),
    _bug("executorch-new-portable-var-half", None,
         "Portable var accumulates its sum, mean and sum of squares in float16/bfloat16",
         [_FLOW_LN, {**_FLOW_LN, "dtype": "bfloat16"}], ["executorch", "executorch-xnnpack"], Verdict.INACCURATE,
         "reproduced",
         """Not reported upstream yet; found by the zoo (GradiumPhononTTSFlowLayerNorm,
         a LayerNorm written out as x.mean / x.var(unbiased=False) so that
         forward-mode JVP works). kernels/portable/cpu/op_var.cpp's
         compute_variance sums, divides and sums the squared deviations in
         CTYPE_OUT, the output dtype, so a float16 row with a x100 outlier is
         off by 6.38 (174x the bound) where eager, which accumulates in float32,
         is within it; XNNPACK leaves var to the portable kernel. A NumPy
         emulation with float16 accumulation matches the output (within 1 ulp
         on 97 % of the elements), float32 accumulation misses it by 6.38.
         #16727 moved layer_norm's and group_norm's accumulators to float.""",
         controls=[({**_FLOW_LN, "dtype": "float32"}, "executorch")]),
    _bug("tvm-new-fp16-linear", None,
         "from_exported_program imports a float16/bfloat16 Linear with bias as a float32 matmul plus a half bias",
         [_ADA_FINAL, {**_ADA_FINAL, "dtype": "bfloat16"}], ["tvm"], Verdict.ERROR, "reproduced",
         """Not reported upstream yet; found by the zoo (Qwen2.5-Omni's
         AdaLayerNormZero_Final, whose scale and shift come from a Linear of the
         conditioning). The torch frontend's _linear emits relax.op.linear(x,
         weight, bias, "float32") and _addmm a matmul with out_dtype="float32",
         both hard-coded, so the half bias meets a float32 product: 'Binary
         operators must have the same datatype ... R.add(p_linear_bias, lv)
         uses T.float16 on the LHS and T.float32 on the RHS'. A bare
         nn.Linear(64, 128).half() fails the same way (checked with the raw
         libraries); float32 imports and passes.""",
         controls=[({**_ADA_FINAL, "dtype": "float32"}, "tvm")]),
    _bug("executorch-new-portable-addmm-half", None,
         "Portable addmm sums the products of a float16/bfloat16 Linear with bias in the input dtype",
         [_LINEAR_FP16, {**_LINEAR_FP16, "dtype": "bfloat16"}], ["executorch"], Verdict.INACCURATE, "reproduced",
         """Not reported upstream yet; found by the zoo (Qwen2.5-Omni's
         AdaLayerNormZero_Final in float16 and bfloat16: its conditioning
         Linear). F.linear with a bias lowers to addmm, whose portable kernel
         (vec_ops.h vec_addmm<T>) keeps `T sum` in the tensor dtype: 64 float16
         products summed in float16 are 35x the bound (bfloat16 53x) where eager
         accumulates in float32. mm without a bias, and XNNPACK's float16
         linear, are right (torch-mlir fixed the same in TOSA, llvm/torch-mlir#4769).""",
         controls=[({**_LINEAR_FP16, "param_shapes": {"lw": [128, 64]}, "program": "return F.linear(x, lw)"},
                    "executorch")]),
    _bug("executorch-new-xnnpack-fp16-sqrt-inf", None,
         "XNNPACK's float16 sqrt returns NaN for +inf (x * rsqrt(x) = inf * 0)",
         [_SQRT_INF], ["executorch-xnnpack"], Verdict.NONFINITE, "reproduced",
         """Not reported upstream (google/XNNPACK) yet; found by the zoo
         (VitDetLayerNorm, ConvNeXt's channels-first LayerNorm written out in
         float16: on a x100 outlier row (x - u) ** 2 overflows to inf, and
         eager's x / sqrt(inf) is 0 where XNNPACK's is NaN, on all 64
         channels). The x86 f16-vsqrt microkernel (f16c-rsqrt) computes x *
         rsqrt(x), masking rsqrt only where it is inf (x = 0); at x = +inf,
         rsqrt is 0 and the product NaN. Here 300 * 300 overflows float16:
         1 / sqrt(inf) is 0 in eager and on the portable kernels, NaN on
         XNNPACK.""",
         controls=[(_SQRT_INF, "executorch")]),
)
