"""The gradients suite's triage rules: which gradients fail tells statistics saved in half from a sum taken in half,
and a gradient record is never given a forward rule's reason."""
from cases.triage import triage
from harness.core.verdicts import Verdict
from harness.engine.execute import failed
from harness.spec import CaseSpec

LN = {"pattern": "layer_norm", "style": "module", "dtype": "float16", "shape": [4096, 64], "grad": True}
GRADIENTS = ("d_x", "d_weight", "d_bias")


def record(raw: dict, path: str, verdict: str, failing=(), message: str = "") -> dict:
    """A record of `raw` on `path` as the runner writes it, the gradients in `failing` with its verdict (the others
    pass)."""
    r = failed(CaseSpec.from_dict(raw), path, Verdict(verdict), message=message).to_dict()
    if failing:
        r["outputs"] = [{"name": g, "verdict": verdict if g in failing else "pass", "message": ""} for g in GRADIENTS]
    return r


def test_a_failing_d_bias_is_torchs_half_sum_and_the_others_the_saved_half_statistics():
    eager = record(LN, "eager", "inaccurate", GRADIENTS)
    assert triage(eager)[0] == "new" and "sums d_bias" in triage(eager)[1]
    for path in ("inductor", "iree", "executorch-recompose", "executorch"):
        derived = record(LN, path, "inaccurate", ("d_x", "d_weight"))
        assert triage(derived)[0] == "pytorch/pytorch#77407" and triage(derived)[1].startswith("by design:"), path
    # an upcast norm runs torch's kernel in float32: no half statistics to blame
    upcast = record({**LN, "style": "upcast", "dtype": "bfloat16", "cast": "float"}, "inductor", "inaccurate", ("d_x",))
    assert triage(upcast) is None


def test_executorch_recomputes_its_forward_kernel_findings_in_the_joint_graph():
    long_rows = record({**LN, "shape": [4, 256]}, "executorch", "inaccurate", ("d_x", "d_weight"))
    assert "executorch-new-layer-norm-half-grad" in triage(long_rows)[1]
    offset = {**LN, "style": "upcast", "dtype": "float32", "cast": "float",
              "input": {"kind": "offset", "offset": 80000.0, "std": 1.0}}
    assert triage(record(offset, "executorch-xnnpack", "nonfinite", ("d_x", "d_weight")))[0] == \
        "pytorch/executorch#16727"
    assert triage(record(offset, "executorch-recompose", "nonfinite", ("d_x", "d_weight"))) is None  # not its class


def test_tvm_trains_with_its_own_flow_or_says_why_not():
    assert "apache/tvm#20909" in triage(record(LN, "tvm-decompose", "inaccurate", ("d_x", "d_bias")))[1]
    no_gradient = record(LN, "tvm", "unsupported", message="Relax registers no gradient for relax.nn.layer_norm "
                                                           "(relax.transform.Gradient cannot differentiate it)")
    assert triage(no_gradient)[1].startswith("not a failure")
    inference = record(LN, "tvm-decompose-inference", "unsupported", message="DecomposeOpsForInference is TVM's "
                                                                              "inference flow")
    assert "by design" in triage(inference)[1]


def test_the_stacks_refusing_the_joint_graph_name_their_words():
    ort = record(LN, "onnxruntime", "error", message="Fail: [ONNXRuntimeError] : 1 : FAIL : Type Error: Type "
                                                     "parameter (T) of Optype (Div) bound to different types")
    assert "float16 joint graph" in triage(ort)[1]
    ov = record({**LN, "dtype": "float32"}, "openvino", "error",
                message="RuntimeError: openvino: converting <built-in function getitem>, SequenceMark")
    assert "native_layer_norm as one output" in triage(ov)[1]


def test_a_gradient_record_is_never_given_a_forward_rule():
    forward = {k: v for k, v in LN.items() if k != "grad"}
    refused = "onnxruntime's CPU provider cannot run it"  # no gradient rule names these words
    assert triage(record(forward, "onnxruntime", "unsupported", message=refused))[0] == "new"  # a forward rule's
    assert triage(record(LN, "onnxruntime", "unsupported", message=refused)) is None          # untriaged


def test_a_float32_gradient_within_its_bound_at_the_floor_is_marginal():
    message = ("output d_x: 1 of 4096 rows beyond what correct float32 implementations achieve; row 2693 err 0.01416 "
               "(0.109x the bound): error beyond 2 ulp of float32 0.109 per unit of the bound, over 2x the float32 "
               "witnesses' 0.0428 and the floor 0.0833; max abs err 0.02848, 0.147x the bound")
    at_floor = record({**LN, "dtype": "float32"}, "eager", "inaccurate", ("d_x",), message)
    at_floor["max_err_over_tol"] = 0.147
    assert triage(at_floor)[1].startswith("marginal")
    at_floor["max_err_over_tol"] = 1.5  # over its bound: not marginal
    assert triage(at_floor) is None


def test_group_and_instance_norm_and_the_joint_graphs_own_ops():
    group = {"pattern": "group_norm", "dtype": "float16", "shape": [64, 32, 8, 8], "groups": 4, "grad": True}
    assert "native_group_norm saves mean" in triage(record(group, "inductor", "inaccurate", ("d_x",)))[1]
    assert "portable kernel" in triage(record(group, "executorch", "inaccurate", ("d_x", "d_weight")))[1]
    instance = {"pattern": "instance_norm", "dtype": "bfloat16", "shape": [64, 16, 64], "grad": True}
    assert triage(record(instance, "eager", "inaccurate", ("d_x",)))[0] == "pytorch/pytorch#136680"
    kept = "SpecViolationError: Operator torch._ops.aten.silu_backward.default is not in Core ATen opset"
    assert "silu_backward" in triage(record({**LN, "dtype": "float32"}, "executorch", "error", message=kept))[1]
    lowering = "torch-mlir has no lowering for torch.constant.int (iree.compiler: failed to legalize operation)"
    assert triage(record(group, "iree", "unsupported", message=lowering))[1].startswith("not a failure")
