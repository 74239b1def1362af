"""The catalog of known upstream bugs: one entry per report, with the cases that show it.

Each entry names the upstream report (or, for a finding not yet reported,
the closest related one), the spec(s) and path(s) that show the bug and the
verdict they get while it is present. `expect` is what `normdiff bugs
--check` must observe with the pinned versions: "reproduced" (every spec on
every path gets `verdict`) or "fixed" (they all pass: a regression guard for
a report fixed upstream). `controls` are executions that pass either way,
so a path that breaks wholesale does not count as a reproduction.

When an upstream release fixes an entry, `--check` says "fixed" where
"reproduced" was recorded and exits 1: flip `expect` to "fixed" and keep the
entry as a regression guard. An entry on a model library's own norm class (the
zoo's findings, cases/zoo_bugs.py) needs that library installed; `--check`
skips it otherwise.
"""
from __future__ import annotations

from cases import compiler_bugs, context_bugs, gradient_bugs, nearmiss, shapes_bugs, zoo_bugs
from cases.bug import EXPECTS, Bug, entry as _bug
from cases.suites import SEED_EXECUTORCH, SEED_TVM
from harness.core.verdicts import Verdict

_TVM = "https://github.com/apache/tvm"
_ET = "https://github.com/pytorch/executorch"

# Variants of the two seeds.
_TVM_FP32 = {**SEED_TVM, "dtype": "float32"}
_LN_BF16 = {"pattern": "layer_norm", "dtype": "bfloat16", "shape": [1, 1024],
            "input": {"kind": "offset", "offset": 100, "std": 1}}
_MANUAL_FP16 = {**SEED_TVM, "style": "manual"}
_LN_BF16_SMALL = {"pattern": "layer_norm", "dtype": "bfloat16", "shape": [2, 64]}
_MANUAL_BF16 = {"pattern": "layer_norm", "style": "manual", "dtype": "bfloat16", "shape": [2, 64]}
_QWEN_BF16 = {**SEED_EXECUTORCH, "dtype": "bfloat16"}
_BN_FP16 = {"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3], "params": {"kind": "normal"}}
_IN_FP16_BIG = {"pattern": "instance_norm", "dtype": "float16", "shape": [1, 2, 256, 256]}
_QWEN_FP32 = {**SEED_EXECUTORCH, "dtype": "float32"}
_LLAMA_FP16 = {**SEED_EXECUTORCH, "style": "llama", "cast": "type_as"}
_T5_FP16 = {**SEED_EXECUTORCH, "style": "t5"}
_QWEN_W32 = {**SEED_EXECUTORCH, "weight_dtype": "float32"}
_CONTIGUOUS = {"pattern": "rms_norm", "style": "qwen", "cast": "to_contiguous", "dtype": "float16",
               "shape": [2, 256], "affine": "none", "input": {"kind": "overflow", "magnitude": 300}}

def _near(name: str, dtype: str = "float32") -> dict:
    """A near-miss catalog entry's program spec (float32: the seed's dtype change does not hide the values)."""
    return nearmiss.spec_of(nearmiss.get(name), dtype)


BUGS: tuple[Bug, ...] = (
    # -- TVM -------------------------------------------------------------
    _bug("tvm-20909", f"{_TVM}/issues/20909",
         "[Relax] DecomposeOpsForTraining loses FP32 accumulation in FP16 LayerNorm",
         [SEED_TVM], ["tvm-decompose"], Verdict.INACCURATE, "reproduced",
         """Open. The seed: ±0.25 alternating x 4096 in float16 gives ±1.4140625
         where the reference is ±0.99992 (max abs error 0.414). The decomposed
         mean/variance reduce in float16; the compiled layer_norm without the
         pass and the float32 input are both right.""",
         controls=[(SEED_TVM, "tvm"), (_TVM_FP32, "tvm-decompose")]),
    _bug("tvm-20909-bf16", f"{_TVM}/issues/20909",
         "DecomposeOpsForTraining on a bfloat16 LayerNorm (the seed's bfloat16 variant)",
         [_LN_BF16], ["tvm-decompose"], Verdict.INACCURATE, "reproduced",
         """The report covers float16; the same decomposition in bfloat16 rounds the
         mean to bfloat16 before subtracting it, so an offset row (100 ± 1) is off by
         0.05 (177 ulp) where eager is within 0.5 ulp. (The seed's ±0.25 input is
         exact in bfloat16 and passes; plain `tvm` cannot compile a bfloat16
         layer_norm at all, see tvm-new-bf16-layer-norm.)""",
         controls=[({**_LN_BF16, "dtype": "float32"}, "tvm-decompose")]),
    _bug("tvm-new-fp16-mean", None,
         "Relax legalizes R.mean on float16 with a float16 sum: a hand-written float16 LayerNorm "
         "is inaccurate on plain `tvm`",
         [_MANUAL_FP16], ["tvm", "tvm-decompose"], Verdict.INACCURATE, "reproduced",
         """Not reported upstream yet. mean/var written out in float16 (as eager
         models do) reach Relax as R.mean, whose legalized sum accumulates in
         float16, so the seed's input gives the seed's ±1.414 even without
         DecomposeOpsForTraining; eager accumulates in float32. Relay cast large
         float16 mean/var to float32 in apache/tvm#13289; Relax does not.
         Re-checked with the 0.27 source: legalize_ops/statistical.py's _te_mean
         is topi.sum in the input dtype divided by the count (which, at 65,536,
         also overflows a float16 constant). Not by design: TOPI's own
         layer_norm/group_norm upcast float16 to float32 (#14264).""",
         controls=[(SEED_TVM, "tvm")]),
    _bug("tvm-new-bf16-layer-norm", None,
         "Relax layer_norm legalization rejects bfloat16: 'only support float32 and float16'",
         [_LN_BF16_SMALL], ["tvm"], Verdict.ERROR, "reproduced",
         """Not reported upstream yet. nn.LayerNorm in bfloat16 imports as
         R.nn.layer_norm and fails in LegalizeOps (TOPI layer_norm checks for
         float32/float16). Re-checked: an explicit guard ("only support float32
         and float16 for now") in layer_norm.h, group_norm.h and instance_norm.h,
         from #14264, which added the float16 upcast: a missing feature that
         fails loudly, not a wrong result.""",
         controls=[({**_LN_BF16_SMALL, "dtype": "float16"}, "tvm")]),
    _bug("tvm-new-bf16-power", None,
         "Relax power legalization rejects bfloat16: 'power only applies to float'",
         [_MANUAL_BF16], ["tvm", "tvm-decompose"], Verdict.ERROR, "reproduced",
         """Not reported upstream yet. (x - mean) ** 2 in bfloat16 imports as
         R.power, whose legalization only accepts IsFloatType, which excludes
         bfloat16 (apache/tvm#19550 is the same guard for integers). Re-checked:
         tirx pow tests the DLPack type code kDLFloat, and bfloat16 carries its
         own code kDLBfloat, so the check excludes it by accident, not by
         design.""",
         controls=[({**_MANUAL_BF16, "dtype": "float16"}, "tvm")]),
    _bug("tvm-19592", f"{_TVM}/issues/19592",
         "LayerNorm lacks numerical stability for large float32 inputs (E[x²]−E[x]² → NaN)",
         [{"pattern": "layer_norm", "dtype": "float32", "shape": [1, 4],
           "input": {"kind": "alternating", "amplitude": 1.5, "offset": 80001.5}}],
         ["tvm", "tvm-decompose"], Verdict.NONFINITE, "fixed",
         """Fixed by apache/tvm#19643 (two-pass variance), in 0.25+; a regression
         guard. [80000, 80003, 80000, 80003]: the one-pass float32 variance is −512,
         so the old TOPI layer_norm returned NaN."""),
    _bug("tvm-14264", "https://github.com/apache/tvm/pull/14264",
         "[Unity][TOPI] fp16 LayerNorm & GroupNorm reduce in float32",
         [{"pattern": "group_norm", "dtype": "float16", "shape": [1, 4, 64, 64], "groups": 2,
           "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0}}],
         ["tvm", "tvm-decompose"], Verdict.INACCURATE, "fixed",
         """Merged 2023; a regression guard. R.nn.group_norm (kept whole by
         DecomposeOpsForTraining) on 8192-element float16 groups: a float16
         reduction would stall as in tvm-20909."""),
    _bug("tvm-new-batch-norm-dtype", None,
         "topi.nn.batch_norm returns float32 for a float16/bfloat16 batch_norm",
         [_BN_FP16, {**_BN_FP16, "dtype": "bfloat16"}], ["tvm"], Verdict.DTYPE_MISMATCH, "reproduced",
         """Not reported upstream yet. Relax declares the input dtype, but the
         legalized TOPI batch_norm adds epsilon as a Python float, which TE makes
         a float32 constant, so sqrt(moving_var + epsilon) and everything after
         it is float32 (checked on TE placeholders: float16 and bfloat16 both
         give float32). The inference decomposition keeps the dtype.""",
         controls=[(_BN_FP16, "tvm-decompose-inference"), ({**_BN_FP16, "dtype": "float32"}, "tvm")]),
    _bug("tvm-new-instance-norm-count", None,
         "TOPI instance_norm takes its element count in float16: 65,536 elements overflow to inf",
         [_IN_FP16_BIG], ["tvm"], Verdict.INACCURATE, "reproduced",
         """Not reported upstream yet. instance_norm.h builds the count as
         MakeConst(data dtype, 1) times the extents, so a float16 instance of
         256 x 256 has count inf, mean = var = 0, and the output is exactly
         x * rsqrt(eps) (checked bit for bit). group_norm.h counts in float32.
         Its variance is E[x^2] - E[x]^2 in one pass as well (apache/tvm#19592's
         pattern, fixed for layer_norm only by #19643).""",
         controls=[({**_IN_FP16_BIG, "shape": [1, 2, 128, 128]}, "tvm")]),
    # -- ExecuTorch: the seed, PR 24428, and its variants ----------------
    _bug("executorch-24428-qwen-fp16", f"{_ET}/pull/24428",
         "Qualcomm RecomposeRmsNorm rebuilds a float16 Qwen RMSNorm on its float32 upcast",
         [SEED_EXECUTORCH], ["executorch-recompose"], Verdict.DTYPE_MISMATCH, "reproduced",
         """Unmerged; executorch 1.5.1 has the old pass. The walk back from the
         norm stops at the float32 cast (edge graphs carry it as
         _to_dim_order_copy), the cast back is lost and the output is float32
         where eager's is float16.""",
         controls=[(_QWEN_FP32, "executorch-recompose")]),
    _bug("executorch-24428-qwen-bf16", f"{_ET}/pull/24428",
         "RecomposeRmsNorm on a bfloat16 Qwen RMSNorm: float32 output",
         [_QWEN_BF16], ["executorch-recompose"], Verdict.DTYPE_MISMATCH, "reproduced",
         """As the float16 seed; the PR's 'masked_scatter: expected self and
         source to have same dtypes' in bfloat16 models is this float32 output
         meeting a bfloat16 tensor.""",
         controls=[(_QWEN_FP32, "executorch-recompose")]),
    _bug("executorch-24428-llama", f"{_ET}/pull/24428",
         "RecomposeRmsNorm on Meta's Llama RMSNorm (x.float() ... .type_as(x)): float32 output",
         [_LLAMA_FP16, {**_LLAMA_FP16, "dtype": "bfloat16"}], ["executorch-recompose"],
         Verdict.DTYPE_MISMATCH, "reproduced",
         """The Llama form (x * x, .type_as(x)) the PR review asked to cover.""",
         controls=[({**_LLAMA_FP16, "dtype": "float32"}, "executorch-recompose")]),
    _bug("executorch-24428-no-dim-order", f"{_ET}/pull/24428",
         "RecomposeRmsNorm without dim order (_skip_dim_order=True): float32 output",
         [SEED_EXECUTORCH], ["executorch-recompose-no-dim-order"], Verdict.DTYPE_MISMATCH, "reproduced",
         """The same with the casts kept as _to_copy.""",
         controls=[(_QWEN_FP32, "executorch-recompose-no-dim-order")]),
    _bug("executorch-24428-capture", f"{_ET}/pull/24428",
         "RecomposeRmsNorm in quantization capture drops a float32 weight's promotion: float16 output",
         [_QWEN_W32], ["executorch-recompose-capture"], Verdict.DTYPE_MISMATCH, "reproduced",
         """A float16 Qwen norm with a float32 weight (output float32 in eager) is
         rebuilt as one rms_norm on the float16 input in capture mode and
         returns float16. The PR leaves a norm whose input and output dtypes
         differ decomposed.""",
         controls=[(SEED_EXECUTORCH, "executorch-recompose-capture")]),
    _bug("executorch-24428-t5", f"{_ET}/pull/24428",
         "RecomposeRmsNorm on T5LayerNorm (squares a float32 copy, scales x): float32 output",
         [_T5_FP16, {**_T5_FP16, "dtype": "bfloat16"}], ["executorch-recompose"],
         Verdict.DTYPE_MISMATCH, "reproduced",
         """T5's norm squares a float32 copy and scales the float16 tensor; the
         old pass rebuilds it on the float32 copy.""",
         controls=[({**_T5_FP16, "dtype": "float32"}, "executorch-recompose")]),
    _bug("executorch-24428-remove-redundancy", f"{_ET}/pull/24428",
         "RemoveRedundancy without dim order drops x.to(float32, memory_format=...): "
         "the float16 sum of squares overflows",
         [_CONTIGUOUS], ["executorch-recompose-no-dim-order"], Verdict.INACCURATE, "reproduced",
         """The PR's second commit. With _skip_dim_order=True, RemoveRedundancy
         removes every _to_copy with a memory_format, including the upcast to
         float32 and the cast back, so pow(2).mean runs in float16 and overflows
         for |x| ~ 300 (no weight, so no rms_norm is rebuilt to hide it).""",
         controls=[(_CONTIGUOUS, "executorch-recompose")]),
    # -- ExecuTorch kernels ----------------------------------------------
    _bug("executorch-new-layer-norm-half", None,
         "Optimized native_layer_norm reads float16/bfloat16 rows as float32 for rows of 256+",
         [SEED_TVM, {"pattern": "layer_norm", "dtype": "bfloat16", "shape": [4, 256]}],
         ["executorch", "executorch-xnnpack"], Verdict.INACCURATE, "reproduced",
         """Not reported upstream yet; appears to come from #16727. Since it made
         acc_t<Half> float, RowwiseMoments (kernels/optimized/cpu/moments_utils.h)
         loads Vectorized<float> straight from the Half/BFloat16 row, so mean and
         variance are computed from reinterpreted bits: the seed's row gives ~79
         instead of ±1. Rows under 256 take the scalar path and are right;
         XNNPACK leaves layer_norm to this kernel.""",
         controls=[(_TVM_FP32, "executorch"),
                   ({"pattern": "layer_norm", "dtype": "float16", "shape": [4, 255]}, "executorch")]),
    _bug("executorch-16727", f"{_ET}/pull/16727",
         "Portable norms accumulate in float16; group_norm casts its element count to float16",
         [{"pattern": "group_norm", "dtype": "float16", "shape": [1, 2, 256, 256], "groups": 2},
          {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 255],
           "input": {"kind": "overflow", "magnitude": 300}}],
         ["executorch"], Verdict.NONFINITE, "fixed",
         """Merged 2026-01, in 1.3.1+; a regression guard. 65536 elements per group
         overflow a float16 count; a float16 sum of squares of |x| ~ 300
         overflows (rows under 256 take the portable scalar path)."""),
    _bug("executorch-13586", f"{_ET}/issues/13586",
         "native_batch_norm kernels reject float16/bfloat16 input with float32 parameters",
         [{"pattern": "batch_norm", "dtype": "float16", "weight_dtype": "float32", "shape": [2, 4, 3, 3],
           "params": {"kind": "normal"}},
          {"pattern": "batch_norm", "dtype": "bfloat16", "weight_dtype": "float32", "shape": [2, 4, 3, 3],
           "params": {"kind": "normal"}}],
         ["executorch", "executorch-xnnpack"], Verdict.ERROR, "reproduced",
         """Open. torch runs BatchNorm on float16 input with float32 parameters;
         the portable kernel's check_batch_norm_args requires one dtype and the
         method fails at run time (0x12).""",
         controls=[({"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3],
                     "params": {"kind": "normal"}}, "executorch")]),

    # -- near misses (cases/nearmiss.py): programs almost a norm, or a norm written another way --
    _bug("executorch-24428-near-miss", f"{_ET}/pull/24428",
         "RecomposeRmsNorm rebuilds programs that are almost an RMSNorm into an rms_norm with wrong values",
         [_near("scaled-not-squared"), _near("scaled-copy"), _near("cube"), _near("product-of-two"),
          _near("residual-add"), _near("wrong-dim"), _near("layer-norm-unshifted-scale")],
         ["executorch-recompose"], Verdict.INACCURATE, "reproduced",
         """The 1.5.1 pass matches its mul/rsqrt/mean/pow pattern without checking
         that the tensor it scales is the one it squares, that the power is 2,
         that the square is of one tensor, or which dim is reduced: float32
         programs that scale another input, a negated copy, or x beside a
         squared residual, that take the mean of a cube or of x*y, that reduce
         dim 0, or a layer norm that scales the uncentred input are rebuilt as
         rms_norm(x) (facts: rms_norm_built true), errors 0.2 to 5.4 where eager
         is within 1e-6. PR #24428 (unmerged) adds the scaled-is-squared and
         pow(2)-or-h*h checks its review asked for.""",
         controls=[(_near("qwen"), "executorch-recompose"), (_near("mul-after"), "executorch-recompose")]),
    _bug("executorch-new-recompose-used-twice", None,
         "RecomposeRmsNorm breaks a correct norm program whose normalized value is used twice",
         [_near("used-twice")], ["executorch-recompose"], Verdict.INACCURATE, "reproduced",
         """New. w * (n + n * n) with n = h * rsqrt(mean(h^2) + eps): the pass
         rebuilds n's pattern into rms_norm with w as its weight although n is
         also read by n * n, so the output is no longer the program's (error
         7.4 where eager is within 1e-6). A rewrite must leave a norm whose
         intermediate has other users alone.""",
         controls=[(_near("qwen"), "executorch-recompose")]),
    _bug("executorch-new-recompose-broadcast-weight", None,
         "RecomposeRmsNorm takes a [1, D] weight's shape as normalized_shape: the rebuilt norm fails to run",
         [_near("broadcast-weight")], ["executorch-recompose"], Verdict.ERROR, "reproduced",
         """New. A Qwen norm whose weight is [1, D] (broadcast over rows, as some
         exported checkpoints keep it) is rebuilt as rms_norm(x, [1, D], w):
         'Given normalized_shape=[1, 64], expected input with shape [*1, 64]'.
         Eager broadcasts the weight and passes.""",
         controls=[(_near("qwen"), "executorch-recompose")]),
) + zoo_bugs.BUGS + compiler_bugs.BUGS + context_bugs.BUGS + gradient_bugs.BUGS + shapes_bugs.BUGS

_BY_ID = {b.id: b for b in BUGS}
assert len(_BY_ID) == len(BUGS), "duplicate bug id"


def ids() -> list[str]:
    return [b.id for b in BUGS]


def get(bug_id: str) -> Bug:
    """The entry `bug_id` (KeyError naming the known ids if unknown)."""
    if bug_id not in _BY_ID:
        raise KeyError(f"unknown bug id {bug_id!r}; known: {', '.join(ids())}")
    return _BY_ID[bug_id]
