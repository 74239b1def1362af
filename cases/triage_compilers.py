"""Triage rules of the `iree`, `openvino` and `openvino-bf16` paths (cases.triage appends them to its RULES).

Written from the records of one nightly run of these paths (iree-base-compiler
and -runtime 3.13.0, iree-turbine 3.9.0, openvino 2026.4.1, torch 2.13.0, on
an AVX512-BF16 CPU without AMX) and checked against the facts each path
records: IREE's reduction accumulator dtypes after torch-mlir's lowering,
OpenVINO's runtime nodes and their precisions. "by design:" reasons are
behaviour the library states in its source or documentation.
"""
from __future__ import annotations

from cases._triage_record import Rule, _case, _half, _msg
from harness.core.verdicts import Verdict

OPENVINO = ("openvino", "openvino-bf16")
# CPUs on which OpenVINO's CPU plugin runs bf16 natively: there its default inference precision is bf16 and
# the bf16 hint takes effect; elsewhere both run float32 (the CPU-conditional entries of docs/gate-and-reports.md).
BF16_CPUS = ("avx512_bf16", "amx_bf16")
WRONG = (Verdict.INACCURATE, Verdict.NONFINITE)


def _iree_wrong(r) -> bool:
    return r["path"] == "iree" and r["verdict"] in WRONG


def _half_reduction(r) -> bool:
    """IREE summed in float16 or bfloat16 (torch-mlir's linalg, facts.iree_reduction_dtypes)."""
    return bool({"f16", "bf16"} & set((r.get("facts") or {}).get("iree_reduction_dtypes") or ()))


def _pattern(r) -> str:
    """The norm a record runs: a module case's lifted pattern, else its spec's."""
    return r.get("lifted_pattern") or _case(r)["pattern"]


def _module_norm(r, pattern: str) -> bool:
    """The norm op itself (nn.LayerNorm, F.layer_norm in a library's class or in a program, as the context
    suite's neighbourhoods call it), not one written out."""
    if _case(r).get("class"):
        return f"F.{pattern}(" in (r.get("program") or "")
    if _case(r).get("program") is not None:
        return f"F.{pattern}(" in _case(r)["program"]
    return _case(r)["pattern"] == pattern and _case(r).get("style", "module") == "module"


def _ov_nodes(r) -> list:
    return (r.get("facts") or {}).get("ov_runtime_nodes") or []


def _ov_wrong(r) -> bool:
    return r["path"] in OPENVINO and r["verdict"] in WRONG


COMPILER_RULES: tuple[Rule, ...] = (
    # -- iree -----
    Rule("new", "by design: IREE's CPU runtime runs dispatches with denormals flushed to zero "
                "(iree_fpu_state_push(IREE_FPU_STATE_FLAG_FLUSH_DENORMALS_TO_ZERO), a fast-math choice its "
                "fpu_state.h states), so subnormal inputs read as zero",
         lambda r: _iree_wrong(r) and _case(r)["input"]["kind"] == "subnormal"),
    Rule("iree-org/iree-turbine#1127", "iree-turbine's aot.export inlines each parameter with np.array(tensor), "
                                       "which torch refuses for bfloat16 (TypeError: Got unsupported ScalarType "
                                       "BFloat16): no bfloat16 module with parameters exports",
         lambda r: r["path"] == "iree" and r["verdict"] == Verdict.ERROR
         and "unsupported ScalarType BFloat16" in _msg(r)),
    Rule("llvm/torch-mlir#2091", "torch-mlir's layer_norm decomposition (DecomposeComplexOps.cpp) takes mean, "
                                 "variance and rsqrt in the input dtype: float16 sums (facts: f16 reductions) "
                                 "round, cancel and overflow where torch accumulates in float32 (the TVM seed "
                                 "gives ±1.414)",
         lambda r: _iree_wrong(r) and _module_norm(r, "layer_norm") and _half(r) and _half_reduction(r)),
    Rule("llvm/torch-mlir#4207", "torch-mlir's rms_norm decomposition (added without an upcast) squares, sums "
                                 "and rsqrts in the input dtype (facts: f16/bf16 reductions)",
         lambda r: _iree_wrong(r) and _module_norm(r, "rms_norm") and _half(r) and _half_reduction(r)),
    Rule("new", "torch-mlir's native_group_norm decomposition (DecomposeAtenNativeGroupNormOp, beside the "
                "layer_norm one of llvm/torch-mlir#2091) reduces in the input dtype: float16/bfloat16 group sums "
                "(facts: f16/bf16 reductions) round, cancel and overflow",
         lambda r: _iree_wrong(r) and _module_norm(r, "group_norm") and _half(r) and _half_reduction(r)),
    Rule("new", "torch-mlir lowers aten.mean/sum of a float16/bfloat16 tensor to a linalg reduction that "
                "accumulates in that dtype (facts: f16/bf16 reductions), where torch's CPU kernels accumulate "
                "reduced-precision reductions in float32: a norm written out with .mean() (or an L2 norm, Tensor.norm: "
                "ZayaQKNorm's float16 sum of squares) loses what eager keeps",
         lambda r: _iree_wrong(r) and _half_reduction(r)),
    Rule("new", "iree-compile fails on bfloat16 norms (layer_norm, batch_norm, the upcast and Qwen forms) while "
                "translating a dispatch for llvm-cpu: 'arith.constant' op failed to verify that all of {value, "
                "result} have same type",
         lambda r: r["path"] == "iree" and r["verdict"] == Verdict.ERROR and "arith.constant' op" in _msg(r)),
    Rule("new", "torch-mlir's group_norm decomposition casts a float32 weight to the float16 input's type with "
                "tensor.cast, which cannot change an element type (iree-compile: cast incompatible); torch takes "
                "float32 weights with a float16 input",
         lambda r: r["path"] == "iree" and r["verdict"] == Verdict.ERROR and "are cast incompatible" in _msg(r)),
    Rule("new", "torch-mlir's instance_norm lowering unsqueezes the weight and bias without checking for None: "
                "an instance norm without affine parameters does not compile ('torch.aten.unsqueeze' op operand "
                "#0 ... got '!torch.none')",
         lambda r: r["path"] == "iree" and r["verdict"] == Verdict.ERROR and "got '!torch.none'" in _msg(r)),
    # -- openvino, openvino-bf16 -----
    Rule("new", "not a bug: OpenVINO's CPU plugin has no GroupNormalization node for a 2-D (N, C) input and "
                "says so at compile (Unsupported operation of type: GroupNormalization)",
         lambda r: r["path"] in OPENVINO and r["verdict"] == Verdict.UNSUPPORTED
         and "Unsupported operation of type: GroupNormalization" in _msg(r)),
    Rule("new", "OpenVINO's PyTorch frontend multiplies the float16 normalized value by a float32 weight "
                "without aligning their types (group_norm, instance_norm): element::Type::merge fails, where "
                "torch's kernels take float32 weights with a float16 input",
         lambda r: r["path"] in OPENVINO and r["verdict"] == Verdict.ERROR and "element::Type::merge" in _msg(r)),
    Rule("new", "by design: bfloat16 conversions on AVX512-BF16/AMX (VCVTNEPS2BF16) treat subnormal inputs as "
                "zero and flush subnormal results, whatever MXCSR says; OpenVINO's bf16 kernels use them",
         lambda r: _ov_wrong(r) and _case(r)["dtype"] == "bfloat16" and _case(r)["input"]["kind"] == "subnormal",
         cpu=BF16_CPUS),
    Rule("openvinotoolkit/openvino#36718", "by design as documented (bf16 inference precision runs the model in "
                                           "bf16): the RMS fusion does not match this norm (facts.ov_fused_rms "
                                           "false), so the decomposed chain, its float32 upcast included, runs "
                                           "in bf16 (Reduce:bf16); the report asks to fuse it",
         lambda r: _ov_wrong(r) and _pattern(r) == "rms_norm" and "Reduce:bf16" in _ov_nodes(r)
         and not r["facts"].get("ov_fused_rms"), cpu=BF16_CPUS),
    Rule("new", "by design as documented (bf16 inference precision runs the model in bf16, the default on CPUs "
                "with native bf16 and the hint of openvino-bf16): a layer norm written with a float32 upcast is "
                "not fused into MVN, and its mean and variance run in bf16 (Reduce:bf16)",
         lambda r: _ov_wrong(r) and _pattern(r) == "layer_norm" and "Reduce:bf16" in _ov_nodes(r),
         cpu=BF16_CPUS),
    Rule("new", "by design as documented (bf16 inference precision): the conditioning Linear of an adaptive norm "
                "runs as FullyConnected:bf16 (or the 1x1 Conv2d of Emu3's spatial norm as Convolution:bf16) even in "
                "a float32 or float16 model, so its scale and shift carry bf16's 8 bits into the norm's output "
                "(Emu3 passes with INFERENCE_PRECISION_HINT f32)",
         lambda r: _ov_wrong(r) and ("FullyConnected:bf16" in _ov_nodes(r)
                                   or ("Convolution:bf16" in _ov_nodes(r) and _case(r)["dtype"] != "bfloat16")),
         cpu=BF16_CPUS),
    Rule("new", "by design as documented (bf16 inference precision): a bfloat16 layer/group norm is fused into "
                "one MVN node whose normalized output is rounded to bf16 before the affine Multiply/Add "
                "(Eltwise:bf16): two roundings where torch's bfloat16 kernels round once",
         lambda r: _ov_wrong(r) and "MVN:bf16" in _ov_nodes(r), cpu=BF16_CPUS),
    Rule("new", "eval batch_norm in float16/bfloat16 runs as Multiply/Add whose scale and shift are folded "
                "from the running statistics in the model's reduced dtype before the plugin converts them to f32 "
                "(runtime nodes: only f32 Eltwise after Converts): marginal, 1.5-4x eager",
         lambda r: _ov_wrong(r) and _case(r)["pattern"] == "batch_norm" and _half(r)),
    Rule("new", "cause not located: float16 norms of tiny or subnormal inputs run in f32 after Converts (runtime "
                "nodes Convert:f32, Reduce:f32) yet err 3-25x eager; consistent with the CPU plugin flushing "
                "float32 denormals (its denormals optimization), not confirmed in its source",
         lambda r: _ov_wrong(r) and _case(r)["dtype"] == "float16" and _case(r)["input"]["kind"] in ("tiny",
                                                                                                    "subnormal")),
)
