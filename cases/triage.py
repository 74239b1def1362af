"""Triage rules: which upstream report (or new finding) a failing record is.

`normdiff gate --update` gives every failure that is new to the baseline the
upstream report and reason of the first rule that matches it, so a nightly
baseline stays readable; a failure no rule matches is marked "untriaged".
Each rule was written from the records of a real nightly run with the pinned
versions (torch 2.13.0, apache-tvm 0.27.0.post1, executorch 1.5.1, onnxruntime
1.32.0) and re-checked against the upstream source: a reason that starts "by
design:" is behaviour the library documents or chooses on purpose (upstream
stays "new": nothing to report, but the gate still expects it), the others say
where the cause is.
"""
from __future__ import annotations

import re

from cases import nearmiss
from harness.core.verdicts import Verdict

from cases._triage_record import Record, Rule, _case, _half, _msg, _on  # noqa: F401 (re-exported)
from cases.triage_compilers import COMPILER_RULES
from cases.triage_context import CONTEXT_RULES, _neighbour
from cases.triage_gradients import GRADIENT_RULES
from cases.triage_shapes import SHAPES_RULES


def _spatial(r: Record) -> int:
    """Elements per instance of an instance norm (the dims after N and C)."""
    n = 1
    for d in _case(r)["shape"][2:]:
        n *= d
    return n


TVM = ("tvm", "tvm-decompose", "tvm-decompose-inference")
ET_RUNTIME = ("executorch", "executorch-xnnpack")
ORT = ("onnxruntime", "onnxruntime-fused")
RECOMPOSE = ("executorch-recompose", "executorch-recompose-no-dim-order", "executorch-recompose-capture")

def _module(r: Record) -> bool:
    """A module case (docs/contracts.md §8: a model library's own norm class, the zoo's)."""
    return bool(_case(r).get("class"))


def _lifted(r: Record) -> str:
    """The lifted program of a module case's record ("" when it did not lift)."""
    return r.get("program") or ""


def _not_lifted(r: Record, words: str) -> bool:
    """Every path of a module case that could not be lifted says the same unsupported line, naming the class."""
    return (_module(r) and r["verdict"] == Verdict.UNSUPPORTED and _msg(r).startswith(f"class {_case(r)['class']}:")
            and words in _msg(r))


def _source(r: Record) -> str:
    """The program a record runs: a module case's lifted program or a program case's own ("" for a style case)."""
    return _lifted(r) or (_case(r).get("program") or "")


def _written_out(r: Record) -> bool:
    """A module case (its lifted program) or a program case that takes mean/var in the input's dtype: no float32
    cast, no F.* norm."""
    source = _source(r)
    return ((".mean(" in source or ".var(" in source) and "torch.float32" not in source
            and ".float()" not in source and "_norm(" not in source)


def _matmul(r: Record) -> bool:
    """A program (or lifted module) with a matrix product: `@` or torch.matmul."""
    return " @ " in _source(r) or "torch.matmul(" in _source(r)


def _within_bound(r: Record) -> bool:
    ratio = r.get("max_err_over_tol")
    return ratio is not None and ratio < 1.0


_BEYOND = re.compile(r"of float32 ([0-9.e+-]+) per unit of the bound, .* the floor ([0-9.e+-]+)")


def _at_the_floor(r: Record) -> bool:
    """A float32 module case flagged by the program rule within 1.5x its floor: a few ulps on one row."""
    found = _BEYOND.search(_msg(r))
    return found is not None and float(found.group(1)) < 1.5 * float(found.group(2))


def _near(r: Record):
    """The near-miss catalog entry (cases/nearmiss.py) a program record runs, or None."""
    return nearmiss.entry_of(_case(r))


def _near_miss(r: Record) -> bool:
    entry = _near(r)
    return entry is not None and not entry.legit


def _float16_copy(r: Record) -> bool:
    """Whether a program record computes on a float16 copy (`.to(torch.float16)`) of its input."""
    return _case(r).get("program") is not None and "torch.float16" in _case(r)["program"]


def _legit(name: str):
    return lambda r: _near(r) is not None and _near(r).name == name


# the shapes suite's and the context suite's first: they match symbolic records, neighbourhood programs only
RULES: tuple[Rule, ...] = SHAPES_RULES + CONTEXT_RULES + (
    # -- module cases the program language cannot hold (the zoo): no path ran, nothing to report -----
    Rule("new", "not a compiler finding: the class's graph holds an op outside normdiff's program language "
                "(none of transformers 5.23's since 0645769, whose language took upsample_nearest2d, cumsum and "
                "linalg_vector_norm), so no path is run (docs/contracts.md §8)",
         lambda r: _not_lifted(r, "is outside the program language")),
    Rule("new", "by design: transformers keeps this norm's weights in float32 (_keep_in_fp32_modules_strict, a name "
                "pattern matching cond_norm.weight); moved whole with .to(dtype), as a module spec and model.to(dtype) "
                "do, it meets torch's CPU layer_norm rule (a float32 input needs float32 weights) in eager itself",
         lambda r: _not_lifted(r, "does not run in eager")),
    # -- programs (the nearmiss suite): pattern matchers taking almost-a-norm for a norm -----
    Rule("pytorch/executorch#24428",
         "RecomposeRmsNorm rebuilds a program that is almost an RMSNorm (another tensor scaled than squared, a "
         "cube, a product, another dim, an uncentred layer norm) as rms_norm(x): wrong values (the PR's "
         "scaled-is-squared and pow(2) checks)",
         lambda r: r["path"] in RECOMPOSE and r["verdict"] == Verdict.INACCURATE and _near_miss(r)
         and r["facts"].get("rms_norm_built")),
    Rule("new", "RecomposeRmsNorm rebuilds a norm whose normalized value has another user (n + n * n): the "
                "other use is lost, wrong values (catalog: executorch-new-recompose-used-twice)",
         lambda r: r["path"] in RECOMPOSE and r["verdict"] == Verdict.INACCURATE and _legit("used-twice")(r)),
    Rule("new", "RecomposeRmsNorm takes a [1, D] weight's shape as normalized_shape: the rebuilt rms_norm fails "
                "to run (catalog: executorch-new-recompose-broadcast-weight)",
         lambda r: r["path"] in RECOMPOSE and r["verdict"] == Verdict.ERROR and "normalized_shape" in _msg(r)
         and _case(r).get("program") is not None),
    # -- the program rule at its floor: a few float32 ulps on a row, no bug ------------------------
    Rule("new", "marginal, not a bug: 4-5 float32 ulps on one row (the compiler's vector exp, sigmoid or rsqrt "
                "are a few ulps off, as correct float32 libraries are), just over the program rule's floor "
                "(0.084-0.093 per unit of the bound against 0.083); its standalone repro passes",
         lambda r: (_module(r) or _neighbour(r) != "") and r["path"] != "eager" and _case(r)["dtype"] == "float32"
         and r["verdict"] == Verdict.INACCURATE and _within_bound(r) and _at_the_floor(r)),
    Rule("new", "RecomposeRmsNorm takes the weight's shape as normalized_shape: a grouped RMSNorm (Mamba2's gated "
                "norm: groups of 16 of the 64 channels, viewed back before the weight) is rebuilt as rms_norm over "
                "[64] on the grouped view, which fails to run (catalog: executorch-new-recompose-grouped)",
         lambda r: r["path"] in RECOMPOSE and r["verdict"] == Verdict.ERROR and _module(r)
         and "normalized_shape" in _msg(r) and r.get("facts", {}).get("rms_norm_built")),
    # -- eager: unstable ways of writing (or computing) a norm --------------------------
    Rule("pytorch/pytorch#136680",
         "torch's CPU instance_norm in float16/bfloat16 is far less accurate than a float32-accumulating "
         "norm (unstable pattern on eager)",
         lambda r: r["path"] == "eager" and _case(r)["pattern"] == "instance_norm" and _half(r)),
    Rule("new", "torch's CPU group_norm on a channels_last float16 input is far less accurate than on the "
                "same contiguous input (unstable pattern on eager)",
         lambda r: r["path"] == "eager" and _case(r)["pattern"] == "group_norm" and _case(r)["layout"] == "channels_last"),
    Rule("new", "by design: mean/var written out in float16/bfloat16 overflow or underflow (x - mean) ** 2 "
                "in eager itself: an unstable way to write the norm, not a compiler bug",
         lambda r: r["path"] == "eager" and _case(r)["style"] == "manual"),
    Rule("new", "by design: the class writes mean and variance out in the input's float16/bfloat16 (ConvNeXt's "
                "channels-first LayerNorm: (x - u).pow(2).mean(1)), which overflow or underflow in eager itself on "
                "outlier rows: an unstable way to write the norm, not a compiler bug",
         lambda r: r["path"] == "eager" and _half(r) and r.get("unstable") and _written_out(r)),

    # -- TVM ---------------------------------------------------------------------------
    Rule("new", "TVM's legalization of bfloat16 layer/group/instance norm: 'only support float32 and float16' "
                "(an explicit guard in TOPI's layer_norm.h/group_norm.h/instance_norm.h; #14264 added float16 only)",
         lambda r: r["path"] in TVM and r["verdict"] == Verdict.ERROR and "Float(16)" in _msg(r)),
    Rule("new", "x ** 2 in bfloat16 legalizes to R.power, rejected: 'power only applies to float' (tirx pow checks "
                "the DLPack code kDLFloat, and bfloat16's is kDLBfloat; apache/tvm#19550 is the guard for integers)",
         lambda r: r["path"] in TVM and "power only applies to float" in _msg(r)),
    Rule("new", "from_exported_program fails on a group_norm without affine: 'Found null pointer node while "
                "traversing AST' (the importer passes gamma=None, beta=None to R.nn.group_norm; its batch_norm "
                "substitutes ones/zeros)",
         lambda r: r["path"] in TVM and "null pointer node" in _msg(r)),
    Rule("new", "from_exported_program builds linear/addmm/matmul/mm/bmm as a matmul with out_dtype='float32' "
                "hard-coded (the importer's _linear and _addmm, and its matmul.default, mm.default, bmm.default "
                "entries): a float16/bfloat16 bias is then added to a float32 product and the import fails "
                "('Binary operators must have the same datatype'), and a half `a @ b` (the context suite's QK "
                "scores) returns float32 where torch returns the input dtype (catalog: tvm-new-matmul-float32-out); "
                "_conv2d_impl hard-codes the same out_dtype, so a half Conv2d's bias meets a float32 convolution "
                "(Emu3's spatial norm: 'float32 on the LHS')",
         lambda r: r["path"] in TVM and (("Binary operators must have the same datatype" in _msg(r)
                                           and ("float32 on the RHS" in _msg(r) or "float32 on the LHS" in _msg(r)))
                                          or (r["verdict"] == Verdict.DTYPE_MISMATCH and _half(r)
                                              and r.get("out_dtype") == "float32" and _matmul(r)))),
    Rule("new", "relax.nn.group_norm rejects a bfloat16 input when imported: 'expects that data must be float, but "
                "got T.bfloat16' (its struct-info check matches the DLPack code kDLFloat, and bfloat16's is kDLBfloat, "
                "as tvm-new-bf16-power; TOPI group_norm.h would refuse bfloat16 next)",
         lambda r: r["path"] in TVM and "relax.nn.group_norm" in _msg(r) and "expects that data must be" in _msg(r)),
    Rule("new", "from_exported_program raises TypeError building a norm whose weight dtype differs from the input's "
                "(Relax norm ops require one dtype; the ONNX frontend casts the parameters since apache/tvm#19979, "
                "the torch frontend does not)",
         lambda r: r["path"] in TVM and "import: TypeError" in _msg(r)),
    Rule("new", "DecomposeOpsForTraining's R.mean/R.variance divide by the element count as a float16 literal; "
                "65,536 overflows (a compile error)",
         lambda r: r["path"] == "tvm-decompose" and "exceeds maximum of float16" in _msg(r)),
    Rule("apache/tvm#20909", "DecomposeOpsForTraining splits layer_norm into mean/variance with float16/bfloat16 "
                             "reduction buffers",
         lambda r: r["path"] == "tvm-decompose" and _case(r)["pattern"] == "layer_norm"
         and _case(r)["style"] != "manual" and _half(r) and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)
         and not _written_out(r)),
    Rule("new", "TOPI layer_norm.h/group_norm.h (apache/tvm#14264) round the float32-normalized value to float16, "
                "then multiply the weight and add the bias in float16: three roundings where eager rounds the affine "
                "once; within the bound, but many times eager's error where weight * z and bias cancel",
         lambda r: r["path"] in TVM and _case(r)["dtype"] == "float16"
         and r["verdict"] == Verdict.INACCURATE and _within_bound(r)
         and ("F.layer_norm(" in _source(r) or "F.group_norm(" in _source(r))),
    Rule("new", "by design: DecomposeOpsForTraining is training-mode batch_norm (relax.nn.batch_norm's doc; "
                "MutateOpsForTraining normalizes with the batch statistics); see tvm-decompose-inference",
         lambda r: r["path"] == "tvm-decompose" and _case(r)["pattern"] == "batch_norm" and r["verdict"] != Verdict.ERROR),
    Rule("new", "topi.nn.batch_norm adds epsilon as a Python float, a float32 constant in TE, so a float16/bfloat16 "
                "batch_norm returns float32 while Relax declares the input dtype",
         lambda r: r["path"] in TVM and _case(r)["pattern"] == "batch_norm" and r["verdict"] == Verdict.DTYPE_MISMATCH),
    Rule("new", "DecomposeOpsForInference writes eval batch_norm as (x - mean) / sqrt(var + eps) * gamma + beta in "
                "float16, each of the five ops rounding (checked bit for bit): marginal, about the bound; eager "
                "computes in float32 (torch-mlir fixed the same decomposition in llvm/torch-mlir#4683)",
         lambda r: r["path"] == "tvm-decompose-inference" and _case(r)["pattern"] == "batch_norm" and _half(r)
         and r["verdict"] == Verdict.INACCURATE),
    Rule("new", "TOPI instance_norm takes its element count in the input dtype: 65,536 elements overflow float16 "
                "to inf, so mean = var = 0 and the output is x * rsqrt(eps) (checked bit for bit)",
         lambda r: r["path"] in TVM and _case(r)["pattern"] == "instance_norm" and _case(r)["dtype"] == "float16"
         and _spatial(r) >= 65520 and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)),
    Rule("new", "from_exported_program's _norm (linalg_vector_norm.default, Tensor.norm) raises |x| to the power "
                "and sums in the input dtype, where torch's CPU norm accumulates float16 in float32: the sum of "
                "squares of a float16 row rounds, and overflows to inf on outlier rows (an L2 QK norm's output 0: "
                "ZayaQKNorm; the facts' tvm_ops hold no astype)",
         lambda r: r["path"] in TVM and _half(r) and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)
         and "linalg_vector_norm" in _lifted(r) and "relax.astype" not in r["facts"].get("tvm_ops", ())),
    Rule("new", "R.mean / R.variance on float16 legalize to a float16 sum (x_red is float16); Relay fixed the "
                "same in apache/tvm#13289",
         lambda r: r["path"] in TVM and _half(r) and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)
         and (_case(r)["style"] == "manual" or _written_out(r))),
    Rule("apache/tvm#19592", "E[x^2] - E[x]^2 in one float32 pass: cancellation (negative variance: NaN) on large "
                             "offsets and constant rows; TOPI group_norm/instance_norm still do it, the two-pass fix "
                             "(apache/tvm#19643) reached layer_norm only",
         lambda r: r["path"] in TVM and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)
         and (_case(r)["pattern"] in ("group_norm", "instance_norm")
              or (not _half(r) and _case(r)["input"]["kind"] in ("offset", "alternating", "uniform")))),

    # -- ONNX Runtime ------------------------------------------------------------------
    Rule("new", "not a bug: onnxruntime's CPU execution provider registers no bfloat16 kernel for this op "
                "(Mul, ReduceMean, InstanceNormalization): the path says unsupported with the op",
         lambda r: r["path"] in ORT and r["verdict"] == Verdict.UNSUPPORTED),
    Rule("microsoft/onnxruntime#22557", "the CPU provider's Sigmoid (MLAS, Eigen's polynomial) is accurate to about "
                                        "1e-7 absolute, not relative: a float32 silu/sigmoid gate of a negative input "
                                        "is off by hundreds of ULPs, tens at the gated norm's output",
         lambda r: r["path"] in ORT and _module(r) and _case(r)["dtype"] == "float32"
         and r["verdict"] == Verdict.INACCURATE and ("F.silu(" in _lifted(r) or "torch.sigmoid(" in _lifted(r))),
    Rule("new", "by design: onnxruntime's CPU provider runs float16 Mul/Add in float32 between Casts it inserts "
                "('InsertedPrecisionFreeCast'; 'Cast nodes need to be added ... since CPU operators does not support "
                "float16', microsoft/onnxruntime#11831), so the float16 rounding between weight * z and + bias is "
                "skipped: closer to FP64 than eager over the rows, a different error where they cancel",
         lambda r: r["path"] in ORT and _module(r) and _case(r)["dtype"] == "float16"
         and r["verdict"] == Verdict.INACCURATE and _within_bound(r)
         and "beyond what correct float32 implementations achieve" in _msg(r)),
    Rule("new", "torch.onnx.export(dynamo=True) writes a mixed-dtype norm (float16 input, float32 scale, which "
                "torch runs) as one LayerNormalization/InstanceNormalization; ONNX's type constraint T forbids "
                "it and onnxruntime refuses the model (related: microsoft/onnxruntime#15021)",
         lambda r: r["path"] in ORT and r["verdict"] == Verdict.ERROR and "bound to different types" in _msg(r)),
    Rule("new", "R.mean on float16 legalizes to a float16 sum, and rsqrt to 1 / sqrt rounded to float16 in between "
                "(tir.rsqrt's default FLegalize): a program that normalises a float16 copy inside a float32 model "
                "errs about 3x what float32-accumulating implementations do on a normal row, under the bound "
                "(reproduced bit for bit); Relay fixed the float16 sum in apache/tvm#13289",
         lambda r: r["path"] in TVM and r["verdict"] == Verdict.INACCURATE and _float16_copy(r)
         and (r.get("max_err_over_tol") or 0.0) <= 1.0),
    Rule("new", "R.mean / R.variance on float16 legalize to a float16 sum: a program that normalises a float16 "
                "copy inside a float32 model overflows it (outlier rows); Relay fixed the same in apache/tvm#13289",
         lambda r: r["path"] in TVM and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE) and _float16_copy(r)),

    # -- ExecuTorch: RecomposeRmsNorm and RemoveRedundancy ------------------------------
    Rule("pytorch/executorch#24428", "RecomposeRmsNorm rebuilds the norm on the float32 cast (or drops the model's "
                                     "cast back): the output dtype changes",
         lambda r: r["path"] in RECOMPOSE and r["verdict"] == Verdict.DTYPE_MISMATCH),
    Rule("pytorch/executorch#24428", "RemoveRedundancy drops a dtype-changing _to_copy(memory_format=...) without "
                                     "dim order (the PR's second commit)",
         lambda r: r["path"] == "executorch-recompose-no-dim-order" and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)),

    # -- ExecuTorch runtime and XNNPACK --------------------------------------------------
    Rule("pytorch/executorch#12914", "portable kernels reject a channels_last (non-default dim order) input",
         lambda r: r["path"] in ET_RUNTIME and r["verdict"] == Verdict.ERROR
         and ("dim_order" in _msg(r) or _case(r)["layout"] == "channels_last")),
    Rule("new", "to_edge rejects a mixed-dtype norm (float16/bfloat16 input, float32 weight) that torch runs",
         lambda r: r["path"] in ET_RUNTIME and "SpecViolationError" in _msg(r)),
    Rule("pytorch/executorch#21866", "optimized native_layer_norm ignores the dim order: a channels_last input is "
                                     "normalized along the wrong axis",
         lambda r: r["path"] in ET_RUNTIME and _case(r)["pattern"] == "layer_norm"
         and _case(r)["layout"] == "channels_last" and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)),
    Rule("new", "XNNPACK's float16 sqrt on x86 (f16c-rsqrt: x * rsqrt(x), rsqrt masked only where it is inf) "
                "returns NaN for +inf: where the model's own float16 variance overflowed (unstable in eager, which "
                "gives x / inf = 0), XNNPACK gives NaN (catalog: executorch-new-xnnpack-fp16-sqrt-inf)",
         lambda r: r["path"] == "executorch-xnnpack" and _half(r) and r["verdict"] == Verdict.NONFINITE
         and "torch.sqrt(" in _source(r)),
    Rule("new", "by design: XNNPACK runs every operator with denormals disabled (xnn_run_operator passes "
                "PTHREADPOOL_FLAG_DISABLE_DENORMALS), so subnormal inputs are flushed to zero",
         lambda r: r["path"] == "executorch-xnnpack" and r["verdict"] == Verdict.INACCURATE
         and _case(r)["input"]["kind"] == "subnormal"),
    Rule("new", "optimized native_layer_norm reads float16/bfloat16 rows of 256+ elements as float "
                "(RowwiseMoments since pytorch/executorch#16727)",
         lambda r: r["path"] in ET_RUNTIME and _case(r)["pattern"] == "layer_norm" and _half(r)
         and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE) and _case(r)["shape"][-1] >= 256),
    Rule("new", "not a bug, by design: XNNPACK's float16 fully-connected kernel sums in float16 on CPUs with "
                "native float16 arithmetic (xnn_f16_gemm_minmax_ukernel_8x32__avx512fp16_broadcast, seen in gdb) "
                "and in float32 elsewhere (xnn_f16_f32acc_gemm on AVX2/AVX512-SKX, where this passes): the "
                "conditioning Linear of an adaptive norm",
         lambda r: r["path"] == "executorch-xnnpack" and _case(r)["dtype"] == "float16"
         and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE) and "F.linear(" in _source(r),
         cpu=("avx512_fp16",)),
    Rule("new", "not a bug, by design: XNNPACK's float16 batch matmul and convolution sum in float16 on CPUs with "
                "native float16 arithmetic (AVX512-FP16), as its fully-connected kernel does, and in float32 "
                "elsewhere (where the same cases pass): a norm's QK scores (nrm @ nrm.T), the delegated 1x1 "
                "convolutions that condition Emu3's spatial norm",
         lambda r: r["path"] == "executorch-xnnpack" and _case(r)["dtype"] == "float16"
         and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)
         and not {"aten.bmm.default", "aten.convolution.default"}.isdisjoint(
             (r.get("facts") or {}).get("delegated_ops", ())),
         cpu=("avx512_fp16",)),
    Rule("new", "the portable addmm kernel (vec_addmm<T>) sums the products in the input dtype: the float16/"
                "bfloat16 conditioning Linear (with bias) of an adaptive norm is far off; mm without a bias and "
                "XNNPACK's float16 linear is right on CPUs without AVX512-FP16",
         lambda r: r["path"] in ET_RUNTIME and _half(r) and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)
         and "F.linear(" in _source(r) and ", None)" not in _source(r).split("F.linear(")[1].split("\n")[0]),
    Rule("new", "the portable var kernel (op_var.cpp) sums, takes the mean and sums the squares in its output "
                "dtype: a float16/bfloat16 variance written out (x.var(-1)) rounds or overflows where eager "
                "accumulates in float32 (pytorch/executorch#16727 fixed this in layer_norm and group_norm only)",
         lambda r: r["path"] in ET_RUNTIME and _half(r) and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)
         and _written_out(r) and ".var(" in _lifted(r)),
    Rule("pytorch/executorch#16727", "portable norm kernels accumulate large-offset float16 rows in reduced "
                                     "precision or E[x^2] - E[x]^2 form: overflow or cancellation",
         lambda r: r["path"] in ET_RUNTIME and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)
         and _case(r)["input"]["kind"] in ("offset", "alternating", "overflow", "uniform")),
    Rule("new", "eval batch_norm in float16 on XNNPACK/portable rounds its folded scale and shift to float16: "
                "marginal, a few times the bound on small outputs",
         lambda r: r["path"] in ET_RUNTIME and _case(r)["pattern"] == "batch_norm" and _half(r)
         and r["verdict"] == Verdict.INACCURATE),
    Rule("new", "the portable convolution kernel sums a float16/bfloat16 Conv2d's products in the input dtype "
                "(a bare Conv2d(64, 64, 1): about 3 ulps where eager has 0.5, checked with the raw libraries): the "
                "1x1 convolutions that condition Emu3's spatial norm; XNNPACK's float16 convolution passes, so the "
                "portable group_norm is not the cause",
         lambda r: r["path"] in ET_RUNTIME and _half(r) and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)
         and _module(r) and "conv2d = " in _lifted(r)),
    Rule("new", "portable group/instance norm in float16/bfloat16 computes its statistics in reduced precision: "
                "constant rows get a non-zero variance, and a 65,536-element count overflows float16 (the overflow "
                "pytorch/executorch#16727 fixed in group_norm)",
         lambda r: r["path"] in ET_RUNTIME and _case(r)["pattern"] in ("group_norm", "instance_norm") and _half(r)
         and r["verdict"] in (Verdict.INACCURATE, Verdict.NONFINITE)),
) + COMPILER_RULES


def rule_of(record: Record) -> Rule | None:
    """The first rule matching a failing record (on a CPU the rule names, if it names any), or None. A gradient
    record (`"grad": true`) is matched by the gradients suite's rules only: the others explain forward kernels."""
    for rule in (GRADIENT_RULES if _case(record).get("grad") else RULES):
        if rule.cpu and set(rule.cpu).isdisjoint(record.get("cpu") or ()):
            continue
        try:
            if rule.match(record):
                return rule
        except (KeyError, TypeError, IndexError):
            continue
    return None


def triage(record: Record) -> tuple[str, str] | None:
    """(upstream, reason) of the first rule matching a failing record, or None."""
    rule = rule_of(record)
    return (rule.upstream, rule.reason) if rule else None
