"""Triage rules of the gradients suite: failures of a backward pass (`"grad": true`, cases/gradients.py,
docs/gradients.md).

A gradient record is triaged by these rules only (cases.triage.rule_of): the
forward rules speak of forward kernels and would give a backward's failure a
forward's reason. Each rule names its paths, its pattern or dtype, its verdict
and, for a wrong value, which gradients fail (`failing_outputs`): d_bias is a
plain sum of the cotangent over rows and needs no statistics, so whether it
fails tells a half-precision sum from statistics saved in half. Written from
the records of `normdiff run --suite gradients` on every path with the pinned
versions (torch 2.13.0, apache-tvm 0.27.0.post1, executorch 1.5.1,
onnxruntime 1.32.0, iree 3.13.0, openvino 2026.4.1) and the catalog's
gradient entries (cases/gradient_bugs.py, docs/findings.md "Gradients").
"""
from __future__ import annotations

import re

from cases._triage_record import Record, Rule, _case, _half, _msg
from harness.core.records import failing_outputs
from harness.core.verdicts import Verdict

TVM = ("tvm", "tvm-decompose", "tvm-decompose-inference")
ORT = ("onnxruntime", "onnxruntime-fused")
OPENVINO = ("openvino", "openvino-bf16")
ET_RUNTIME = ("executorch", "executorch-xnnpack")
# the paths that run torch's own backward: eager's kernels, or torch's joint graph (whose forward native_layer_norm
# is torch's CPU kernel or its decomposition, traced on CPU) compiled or run by the stack
TORCH_DERIVED = ("eager", "inductor", "inductor-emulate", "executorch", "executorch-xnnpack", "executorch-recompose",
                 "executorch-recompose-no-dim-order", "executorch-recompose-capture", "iree")
RECOMPOSE = ("executorch-recompose", "executorch-recompose-no-dim-order", "executorch-recompose-capture")
# the paths that run torch's CPU native_layer_norm_backward kernel itself (the capture path keeps it whole)
TORCH_KERNEL = ("eager", "executorch-recompose-capture")
WRONG = (Verdict.INACCURATE, Verdict.NONFINITE)
WEIGHT = {"d_weight", "d_w"}  # the weight's gradient: a module's parameter, a program's `w`
BF16_CPUS = ("avx512_bf16", "amx_bf16")  # where OpenVINO's default inference precision is bf16
_BEYOND = re.compile(r"^output \w+: [123] of \d{4,} rows beyond .* of (?:float32|float16|bfloat16) ([0-9.e+-]+) "
                     r"per unit of the bound, .* the floor ([0-9.e+-]+)")


def _grad(r: Record) -> bool:
    return bool(_case(r).get("grad"))


def _failing(r: Record) -> set[str]:
    """The names of the gradients that did not pass (empty for an execution with no scored output)."""
    return set(failing_outputs(r) or ())


def _wrong(r: Record) -> bool:
    return _grad(r) and r["verdict"] in WRONG


def _layer_norm(r: Record) -> bool:
    """A layer norm torch runs as its native_layer_norm: a catalog case or a library class of the zoo (SamLayerNorm),
    not a program (which writes its norm out)."""
    return _case(r).get("pattern") == "layer_norm" and not _case(r).get("program")


def _float32_norm(r: Record) -> bool:
    """The norm itself runs in float32: a float32 case, or a half case of the upcast style."""
    return _case(r)["dtype"] == "float32" or _case(r).get("style") == "upcast"


def _marginal(r: Record) -> bool:
    """A gradient within its bound, flagged for 1-3 rows of thousands under twice the floor beyond 2 ulps."""
    found = _BEYOND.search(_msg(r))
    ratio = r.get("max_err_over_tol")
    return (found is not None and ratio is not None and ratio < 1.0
            and float(found.group(1)) < 2 * float(found.group(2)))


GRADIENT_RULES: tuple[Rule, ...] = (
    # -- paths that do not train a case: no gradient computed, nothing wrong ---------------------
    Rule("new", "by design, not a failure: DecomposeOpsForInference is TVM's inference flow; TVM's training flow is "
                "tvm-decompose's (Path.cannot_train)",
         lambda r: _grad(r) and r["path"] == "tvm-decompose-inference" and r["verdict"] == Verdict.UNSUPPORTED),
    Rule("new", "not a failure: Relax registers no gradient for the norm's op (relax.nn.layer_norm, group_norm, "
                "instance_norm, rsqrt), so relax.transform.Gradient cannot differentiate it; found before compiling",
         lambda r: _grad(r) and r["path"] in TVM and r["verdict"] == Verdict.UNSUPPORTED
         and "registers no gradient" in _msg(r)),
    Rule("new", "not a failure: relax.transform.Gradient refuses a bfloat16 function ('Only Tensors of floating "
                "point dtype ... can require gradients': its check does not count bfloat16 as floating)",
         lambda r: _grad(r) and r["path"] in TVM and r["verdict"] == Verdict.UNSUPPORTED
         and "Gradient refuses the dtype" in _msg(r)),
    # -- stacks that do not take torch's joint graph ----------------------------------------------
    Rule("new", "ONNX Runtime refuses the float16/bfloat16 joint graph of a norm: torch.onnx exports a backward "
                "op (layer norm's Div, instance norm's Add) with a half operand and a float32 one, the forward's "
                "statistics ('Type parameter (T) of Optype (Div) bound to different types'); float32 loads and runs",
         lambda r: _grad(r) and r["path"] in ORT and r["verdict"] == Verdict.ERROR
         and "Type parameter (T) of Optype (" in _msg(r) and "bound to different types" in _msg(r)),
    Rule("new", "not a bug: onnxruntime's CPU execution provider registers no bfloat16 kernel for an op of the "
                "joint graph (Mul, ...): the path says unsupported with the op, as for the forward",
         lambda r: _grad(r) and r["path"] in ORT and r["verdict"] == Verdict.UNSUPPORTED
         and "has no kernel for" in _msg(r)),
    Rule("new", "ONNX Runtime's graph (torch.onnx's export of the joint graph) returns a float16 program's "
                "weight and bias gradients in float32 where torch gives float16 (values right, 1e-5 of the bound): "
                "the sum over rows comes back without its cast to the parameter's dtype; cause not located",
         lambda r: _grad(r) and r["path"] in ORT and r["verdict"] == Verdict.DTYPE_MISMATCH),
    Rule("new", "OpenVINO's PyTorch frontend converts aten.native_layer_norm as one output, so the joint graph's "
                "getitem of its mean and rstd (read by native_layer_norm_backward) fails to convert, in every dtype",
         lambda r: _grad(r) and r["path"] in OPENVINO and r["verdict"] == Verdict.ERROR
         and "converting <built-in function getitem>" in _msg(r)),
    Rule("new", "iree-compile fails on the bfloat16 joint graph as on the bfloat16 forward, translating a dispatch "
                "for llvm-cpu: 'arith.constant' op failed to verify that all of {value, result} have same type",
         lambda r: _grad(r) and r["path"] == "iree" and r["verdict"] == Verdict.ERROR
         and "arith.constant' op" in _msg(r)),
    Rule("new", "not a failure: torch-mlir has no lowering for an op of the joint graph (torch.constant.int, "
                "torch.constant.float, torch.vtensor.literal: iree.compiler 'failed to legalize operation'), so the "
                "path says unsupported with the op",
         lambda r: _grad(r) and r["path"] == "iree" and r["verdict"] == Verdict.UNSUPPORTED
         and "torch-mlir has no lowering for" in _msg(r)),
    Rule("new", "not a gradient finding: TVM's relax.nn.group_norm refuses bfloat16 data when the export is "
                "imported ('expects that data must be float...'), before any gradient (TOPI's norms take float32 "
                "and float16 only)",
         lambda r: _grad(r) and r["path"] in TVM and r["verdict"] == Verdict.ERROR and _case(r)["dtype"] == "bfloat16"
         and "relax.nn.group_norm" in _msg(r) and "expects that data must be" in _msg(r)),
    Rule("new", "OpenVINO's PyTorch frontend fails on the joint graph of the residual-add RMSNorm neighbourhood "
                "(Check 'is_number(name)' failed in translate_session.cpp): an input name of the joint graph it "
                "reads as a number; cause not located",
         lambda r: _grad(r) and r["path"] in OPENVINO and r["verdict"] == Verdict.ERROR
         and "is_number(name)" in _msg(r)),
    Rule("new", "torch's export keeps an activation's backward kernel whole in the joint graph "
                "(aten.silu_backward, SiLU before the norm), which no stack here takes: to_edge's verifier refuses it "
                "(not in the Core ATen opset), OpenVINO has no conversion rule for it",
         lambda r: _grad(r) and r["verdict"] in (Verdict.ERROR, Verdict.UNSUPPORTED)
         and "_backward.default" in _msg(r)
         and ("is not in Core ATen opset" in _msg(r) or "No conversion rule found" in _msg(r))),
    Rule("new", "torch.onnx fails to convert the joint graph of the SiLU-before-RMSNorm neighbourhood (ConversionError "
                "at step 3/3; the record's message is cut before the op): the graph's aten.silu_backward, which "
                "to_edge and OpenVINO refuse by name, is the likely op; not confirmed",
         lambda r: _grad(r) and r["path"] in ORT and r["verdict"] == Verdict.ERROR
         and "Failed to convert the exported program to an ONNX model" in _msg(r)),
    Rule("new", "OpenVINO's inference request throws running the bfloat16 joint graph of DETR's frozen batch norm "
                "(infer_request.cpp:104; the record's message is cut before the reason); not located",
         lambda r: _grad(r) and r["path"] in OPENVINO and r["verdict"] == Verdict.ERROR
         and "infer_request.cpp" in _msg(r)),
    Rule("iree-org/iree-turbine#1127", "iree-turbine's aot.export inlines each parameter with np.array(tensor), "
                                       "which torch refuses for bfloat16 (TypeError: Got unsupported ScalarType "
                                       "BFloat16): no bfloat16 backward with parameters exports, as for the forward",
         lambda r: _grad(r) and r["path"] == "iree" and r["verdict"] == Verdict.ERROR
         and "unsupported ScalarType BFloat16" in _msg(r)),
    # -- float32: a few ulps on one row ------------------------------------------------------------
    Rule("new", "marginal, not a bug: a gradient within its bound (0.1-0.35x) with 1-3 rows of thousands a few "
                "ulps over the floor beyond 2 ulps (0.084-0.14 per unit of the bound against 0.083)",
         lambda r: _wrong(r) and r["verdict"] == Verdict.INACCURATE and _marginal(r)),
    # -- ExecuTorch: the forward kernels the joint graph recomputes ------------------------------
    Rule("new", "the joint graph recomputes the forward's native_layer_norm on ExecuTorch, whose optimized kernel "
                "reads float16/bfloat16 rows of 256+ as float32 bits (the forward finding "
                "executorch-new-layer-norm-half): d_x and d_weight thousands of times their bounds, d_bias passes "
                "(catalog: executorch-new-layer-norm-half-grad)",
         lambda r: _wrong(r) and r["path"] in ET_RUNTIME and _layer_norm(r) and _half(r)
         and _case(r)["shape"][-1] >= 256 and "d_bias" not in _failing(r)),
    Rule("pytorch/executorch#16727", "the joint graph recomputes the forward's native_layer_norm on ExecuTorch, "
                                     "whose float32 kernel (a float32 or upcast norm) takes large-offset rows' "
                                     "statistics in a cancelling form, the forward's finding: d_x and d_weight off "
                                     "(non-finite at an offset of 80,000), d_bias passes; executorch-recompose runs "
                                     "the same edge graph right",
         lambda r: _wrong(r) and r["path"] in ET_RUNTIME and _layer_norm(r) and _float32_norm(r)
         and _case(r)["input"]["kind"] == "offset" and "d_bias" not in _failing(r)),
    Rule("pytorch/executorch#16727", "the joint graph recomputes the forward's group/instance norm on ExecuTorch, "
                                     "whose portable kernel takes a large-offset float32 row's statistics in a "
                                     "cancelling form (the forward's finding): d_x hundreds of times the float32 "
                                     "witnesses' error on rows whose bound is infinite (an offset of 80,000)",
         lambda r: _wrong(r) and r["path"] in ET_RUNTIME and _case(r)["pattern"] in ("group_norm", "instance_norm")
         and _case(r)["dtype"] == "float32" and _case(r)["input"]["kind"] == "offset"),
    Rule("new", "the joint graph recomputes the forward's group/instance norm on ExecuTorch, whose portable kernel "
                "computes float16/bfloat16 statistics in reduced precision (the forward finding; non-finite where "
                "a count or sum overflows float16), on top of torch's half statistics the backward reads",
         lambda r: _wrong(r) and r["path"] in ET_RUNTIME and _case(r)["pattern"] in ("group_norm", "instance_norm")
         and _half(r) and not _float32_norm(r)),
    Rule("pytorch/executorch#24428", "RemoveRedundancy drops the dtype-changing _to_copy(memory_format=...) of an "
                                     "upcast norm without dim order (the PR's second commit): the joint graph's "
                                     "norm runs in bfloat16/float16, d_x hundreds of times its bound",
         lambda r: _wrong(r) and r["path"] == "executorch-recompose-no-dim-order" and _half(r)
         and _case(r).get("cast") == "to_contiguous"),
    Rule("pytorch/executorch#24428", "RecomposeRmsNorm rebuilds the norm on the float32 cast, so the joint "
                                     "graph's d_weight comes back float32 where torch's backward gives the "
                                     "parameter's bfloat16/float16 (its values right): the forward's output-dtype "
                                     "finding, on the weight gradient",
         lambda r: _grad(r) and r["path"] in RECOMPOSE and r["verdict"] == Verdict.DTYPE_MISMATCH
         and (r.get("facts") or {}).get("rms_norm_built")),
    Rule("new", "RecomposeRmsNorm rebuilds the forward RMSNorm inside the joint graph (facts.rms_norm_built) and "
                "the weight's gradient, which reads the forward's normalized value, errs 272x to 37,000x its bound "
                "(float32) while d_x passes: consistent with the used-twice class (the "
                "normalized value's other user, the backward's, lost: executorch-new-recompose-used-twice), not "
                "confirmed on the joint graph",
         lambda r: _wrong(r) and r["path"] in RECOMPOSE and (r.get("facts") or {}).get("rms_norm_built")
         and bool(_failing(r)) and _failing(r) <= WEIGHT),
    Rule("new", "RecomposeRmsNorm matches a chain of the joint graph and rebuilds it as rms_norm with another "
                "tensor's shape as normalized_shape ([16, 64] for an input of [16, 1]): the rebuilt op fails to run "
                "(the weight-shape class of executorch-new-recompose-broadcast-weight)",
         lambda r: _grad(r) and r["path"] in RECOMPOSE and r["verdict"] == Verdict.ERROR
         and "normalized_shape" in _msg(r)),
    Rule("pytorch/executorch#24428", "RecomposeRmsNorm rebuilds the norm on the float32 cast inside the joint "
                                     "graph: its float32 output meets a half op the graph keeps (the matmul after "
                                     "it, softmax's backward), which refuses the mixed dtypes ('expected m1 and m2 "
                                     "to have the same dtype', 'expected scalar type Half but found Float')",
         lambda r: _grad(r) and r["path"] in RECOMPOSE and r["verdict"] == Verdict.ERROR
         and (r.get("facts") or {}).get("rms_norm_built")
         and ("to have the same dtype" in _msg(r) or "expected scalar type" in _msg(r))),
    Rule("new", "XNNPACK's float16 softmax after an RMSNorm, backward: d_x within its bound (0.29x) but 4 of 16 "
                "rows over twice the float32 witnesses' error (0.19 per unit of the bound against 0.04); cause not "
                "isolated",
         lambda r: _wrong(r) and r["path"] == "executorch-xnnpack" and _case(r)["dtype"] == "float16"
         and "torch.softmax(" in (_case(r).get("program") or "") and (r.get("max_err_over_tol") or 2) < 1),
    # -- IREE, OpenVINO: reductions in the reduced dtype ----------------------------------------
    Rule("new", "torch-mlir lowers the joint graph's float16/bfloat16 sum over rows (d_weight = sum(dy * h) where "
                "the weight multiplies a half normalized value, as Llama's RMSNorm does) to a linalg reduction "
                "accumulating in that dtype (facts: f16 reductions), where torch's CPU sum accumulates in float32: "
                "the forward's torch-mlir reduction finding, on the weight gradient",
         lambda r: _wrong(r) and r["path"] == "iree" and _half(r)
         and bool({"f16", "bf16"} & set((r.get("facts") or {}).get("iree_reduction_dtypes") or ()))),
    Rule("openvinotoolkit/openvino#36718", "by design as documented (bf16 inference precision runs the model in "
                                           "bf16 on CPUs with native bf16): the joint graph's RMS chain and its "
                                           "backward, the float32 upcast included, run in bf16 (Reduce:bf16); the "
                                           "report asks to fuse the chain",
         lambda r: _wrong(r) and r["path"] in OPENVINO and _case(r)["pattern"] == "rms_norm"
         and "Reduce:bf16" in ((r.get("facts") or {}).get("ov_runtime_nodes") or ()), cpu=BF16_CPUS),
    Rule("new", "by design as documented (bf16 inference precision on CPUs with native bf16): the joint graph's "
                "reductions run in bf16 (Reduce:bf16), the model's float32 upcast included",
         lambda r: _wrong(r) and r["path"] in OPENVINO
         and "Reduce:bf16" in ((r.get("facts") or {}).get("ov_runtime_nodes") or ()), cpu=BF16_CPUS),
    # -- TVM's training flow ----------------------------------------------------------------------
    Rule("new", "by design: DecomposeOpsForTraining decomposes batch_norm in training mode (batch statistics: "
                "Gradient differentiates relax.mean and relax.variance), as the forward's baseline says, so an eval "
                "batch_norm's gradient (running statistics) is a training batch_norm's: d_x 10^5-10^9x its bound",
         lambda r: _wrong(r) and r["path"] == "tvm-decompose" and _case(r)["pattern"] == "batch_norm"),
    Rule("new", "the backward face of apache/tvm#20909: after DecomposeOpsForTraining every op is float16 and "
                "Relax's registered gradients (variance's 2/N x - 2/N^2 sum(x), the bias's collapse_sum) sum again "
                "in float16 (catalog: tvm-new-gradient-fp16)",
         lambda r: _wrong(r) and r["path"] == "tvm-decompose" and _case(r)["dtype"] == "float16"),
    Rule("new", "Relax's registered gradient of a float16 broadcast add (collapse_sum) sums the bias gradient over "
                "rows in float16 (d_b 11x on the residual-add layer norm written out, whose other gradients pass): "
                "the sum tvm-new-gradient-fp16 shows on tvm-decompose",
         lambda r: _wrong(r) and r["path"] == "tvm" and _case(r)["dtype"] == "float16"
         and bool(_failing(r)) and _failing(r) <= {"d_b", "d_bias"}),
    # -- torch's CPU LayerNorm backward -----------------------------------------------------------
    Rule("new", "torch's CPU float16/bfloat16 LayerNorm backward kernel sums d_bias (a sum of the cotangent, no "
                "statistics) and d_weight over rows in the half dtype, where its decomposition sums in float32 and "
                "rounds once; d_x carries the saved half mean/rstd too (catalog: "
                "pytorch-new-cpu-layer-norm-backward-half)",
         lambda r: _wrong(r) and r["path"] in TORCH_KERNEL and _layer_norm(r) and _half(r)
         and "d_bias" in _failing(r)),
    Rule("pytorch/pytorch#136680", "torch's CPU instance_norm in float16/bfloat16 (batch_norm over the reshaped "
                                   "input) is far less accurate than a float32-accumulating norm, forward and "
                                   "backward: every path deriving its backward from torch's shares d_x 37-680x",
         lambda r: _wrong(r) and r["path"] in TORCH_DERIVED and _case(r)["pattern"] == "instance_norm"
         and _half(r) and not _float32_norm(r)),
    Rule("new", "by design, as layer norm's (pytorch/pytorch#77407): torch's CPU native_group_norm saves mean and "
                "rstd in the float16/bfloat16 input dtype, so every backward derived from torch reads a half rstd: "
                "d_x 11-16x, d_weight within its bound but over the witnesses",
         lambda r: _wrong(r) and r["path"] in TORCH_DERIVED and _case(r)["pattern"] == "group_norm"
         and _half(r) and not _float32_norm(r)),
    Rule("new", "a float32 instance norm at an offset of 80,000 over rows of 4,096 (the bound infinite: judged "
                "against the witnesses alone): Inductor's d_x 2.5x the float32 witnesses' error on one row of 16; "
                "cause not isolated",
         lambda r: _wrong(r) and r["path"] in ("inductor", "inductor-emulate") and _case(r)["dtype"] == "float32"
         and _case(r)["pattern"] == "instance_norm" and _case(r)["input"]["kind"] == "offset"),
    Rule("pytorch/pytorch#77407", "by design: torch's CPU native_layer_norm saves mean and rstd in the float16/"
                                  "bfloat16 input dtype and its decomposition copies that on CPU (#139923), so "
                                  "every backward derived from torch reads a half rstd: d_x and d_weight over their "
                                  "bounds, d_bias passes (catalog: pytorch-new-cpu-layer-norm-half-stats)",
         lambda r: _wrong(r) and r["path"] in TORCH_DERIVED and _layer_norm(r) and _half(r)
         and not _float32_norm(r) and _failing(r) <= {"d_x", "d_weight"}),
)
