"""The context suite's triage rules for the new ops' neighbourhoods: each finding of 37c92e5's cold run goes to
its own cause, and only under the conditions its reason states (a dtype, a path, the runtime nodes)."""
from cases import neighbours as nbs
from cases.triage import rule_of, triage
from harness.core.verdicts import Verdict
from harness.engine.execute import failed
from harness.spec import CaseSpec

QWEN = nbs.Norm("rms_norm", "qwen", "to")
LAYER = nbs.Norm("layer_norm", "module")
BF16_CPU = ["f16c", "fma", "avx2", "avx512f", "avx512_bf16"]
AVX2_CPU = ["f16c", "fma", "avx2"]


def record(neighbour: str, norm: nbs.Norm, dtype: str, path: str, verdict: str, ratio: float | None = None,
           **fields) -> dict:
    """A failing record of the context case `norm` in `dtype` wrapped in `neighbour` (as the runner writes it)."""
    spec = CaseSpec.from_dict(nbs.spec_of(nbs.BY_NAME[neighbour], norm, dtype))
    r = failed(spec, path, Verdict(verdict), message=fields.pop("message", "")).to_dict()
    r.update(max_err_over_tol=ratio, cpu=fields.pop("cpu", BF16_CPU), **fields)
    return r


def reason(r: dict) -> str:
    found = triage(r)
    assert found is not None, r["case"]["program"]
    return found[0] + ": " + found[1]


def test_tanh_gelu_in_float32_is_told_apart_by_path():
    xnnpack = record("gelu-tanh-after", QWEN, "float32", "executorch-xnnpack", "inaccurate", 92.9)
    assert reason(xnnpack).startswith("pytorch/executorch#22851: XNNPACK's GELU ignores `approximate`")
    assert "0.797724" in reason(record("gelu-tanh-after", QWEN, "float32", "iree", "inaccurate", 22.4))
    # the erf form on XNNPACK is what XNNGelu computes: not this finding
    erf = record("gelu-after", QWEN, "float32", "executorch-xnnpack", "inaccurate", 90.0)
    assert triage(erf) is None or "#22851" not in triage(erf)[0]


def test_a_half_matmul_returning_float32_on_tvm_is_the_importers_out_dtype():
    for dtype in ("float16", "bfloat16"):
        r = record("qk-scores", LAYER, dtype, "tvm", "dtype_mismatch", 0.09, out_dtype="float32")
        assert "matmul/mm/bmm as a matmul with out_dtype='float32'" in reason(r)
    # without a matmul, a float32 output on TVM is another cause
    r = record("softmax-after", QWEN, "float16", "tvm", "dtype_mismatch", 0.1, out_dtype="float32")
    assert triage(r) is None or "matmul/mm/bmm" not in triage(r)[1]


def test_openvinos_bf16_matmul_holds_only_where_it_runs_in_bf16():
    nodes = {"ov_runtime_nodes": ["Input:f32", "MVN:bf16", "MatMul:bf16", "Output:f32"]}
    r = record("qk-scores", LAYER, "float32", "openvino", "inaccurate", 598.6, facts=nodes)
    assert "MatMul:bf16" in reason(r) and rule_of(r).cpu
    # the same record from a CPU without native bf16 is not explained by bf16 inference precision
    r = record("qk-scores", LAYER, "float32", "openvino", "inaccurate", 598.6, facts=nodes, cpu=AVX2_CPU)
    assert triage(r) is None or "bf16" not in triage(r)[1]
    # nor one whose matmul ran in f32
    r = record("qk-scores", LAYER, "float32", "openvino", "inaccurate", 598.6,
               facts={"ov_runtime_nodes": ["Input:f32", "MatMul:f32", "Output:f32"]})
    assert triage(r) is None or "MatMul:bf16" not in triage(r)[1]


def test_float16_softmax_and_tanh_gelu_on_tvm_are_its_float16_arithmetic():
    assert "TOPI softmax" in reason(record("softmax-after", QWEN, "float16", "tvm", "inaccurate", 1.68))
    assert "relax.nn.gelu_tanh" in reason(record("gelu-tanh-after", QWEN, "float16", "tvm-decompose",
                                                 "inaccurate", 0.3))
    # the marginal gelu-tanh reason says "within the bound": over it, it is not the explanation
    r = record("gelu-tanh-after", QWEN, "float16", "tvm", "inaccurate", 3.0)
    assert triage(r) is None or "relax.nn.gelu_tanh" not in triage(r)[1]
