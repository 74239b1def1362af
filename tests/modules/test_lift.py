"""Lifting a module's torch.export graph into a program: the program computes what the class computes."""
import numpy as np
import pytest

from harness.engine.cases import Cases, CaseProblem
from harness.modules.module_case import Resolved, build_case, resolve, restore
from harness.program import evaluate, parse
from harness.oracle.inputs import make_inputs
from harness.spec import CaseSpec

LLAMA = {"pattern": "rms_norm", "class": "user_norms:LlamaRMSNorm", "init": {"hidden_size": 64},
         "shape": [2, 8, 64], "params": {"kind": "normal"}}


def lifted(raw):
    return resolve(CaseSpec.from_dict(raw))


def test_the_llama_norm_lifts_to_its_program_line_by_line():
    case = lifted({**LLAMA, "dtype": "bfloat16"})
    assert case.resolved.source.splitlines() == [
        "to = x.to(torch.float32)", "pow_1 = to ** 2", "mean = pow_1.mean(-1, keepdim=True)",
        "add = mean + 1e-06", "rsqrt = torch.rsqrt(add)", "mul = to * rsqrt", "to_1 = mul.to(torch.bfloat16)",
        "mul_1 = weight * to_1", "return mul_1"]
    assert case.resolved.pattern == "rms_norm" and case.resolved.params == (("weight", "weight", (64,)),)


@pytest.mark.parametrize("raw, ops", [
    ({"class": "user_norms:GatedRMSNorm", "init": {"hidden_size": 64}, "shape": [2, 8, 64],
      "inputs": {"gate": {"kind": "normal"}}}, ["F.silu(", "gate"]),
    ({"class": "user_norms:ChannelsFirstLayerNorm", "init": {"channels": 16}, "shape": [2, 16, 4, 4]},
     ["mean(1, keepdim=True)", "unsqueeze"]),
    ({"class": "user_norms:AdaptiveLayerNorm", "init": {"dim": 32, "cond_dim": 8}, "shape": [2, 4, 32],
      "inputs": {"cond": {"kind": "normal", "shape": [2, 8]}}}, ["F.linear(silu, linear_weight, linear_bias)", ".narrow(1, 0, 32)", "F.layer_norm("]),
    ({"class": "torch.nn:BatchNorm2d", "init": {"num_features": 8}, "shape": [2, 8, 3, 3],
      "params": {"kind": "ones"}}, ["torch.rsqrt(running_var", "[:, None, None] + 1e-05)"]),
    ({"class": "torch.nn:GroupNorm", "init": {"num_groups": 2, "num_channels": 8}, "shape": [2, 8, 3, 3]},
     ["F.group_norm(x, 2, weight, bias, 1e-05)"]),
    ({"class": "user_norms:PerHeadLayerNorm", "init": {"dim": 16, "num_heads": 2}, "shape": [2, 2, 3, 16],
      "params": {"kind": "normal"}}, [".narrow(1, 1, 1)", "torch.cat([layer_norm, layer_norm_1], 1)"]),
    ({"class": "user_norms:NeighbourhoodNorm", "init": {"dim": 16}, "shape": [2, 3, 8, 16]},
     ["F.avg_pool2d(", "F.interpolate(", "F.max_pool2d(", "F.softmax(", " @ ", "F.gelu(", "approximate='tanh'",
      "F.elu(", "F.hardswish(", "torch.cumsum(", "torch.clamp(", "torch.ones_like(", "torch.cat(["]),
    ({"class": "user_norms:SpatialNorm", "init": {"channels": 8}, "shape": [2, 8, 4, 4], "params": {"kind": "normal"},
      "inputs": {"q": {"kind": "normal", "shape": [2, 8, 2, 2]}}},
     ["F.interpolate(q, size=(4, 4))", ".view(8, 8) @ ", "F.group_norm("]),
    ({"class": "user_norms:RunningGroupNorm", "shape": [2, 6, 16]},
     ["torch.ones_like(", "torch.cumsum(", "dim=1)", "torch.clamp("]),
    ({"class": "user_norms:L2QKNorm", "shape": [2, 4, 3, 16]},
     ["torch.sqrt(torch.square(", ".sum(-1, keepdim=True)", "torch.clamp("]),
])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_real_norms_lift_and_their_fp64_program_is_the_module_in_float64(raw, ops, dtype):
    spec = CaseSpec.from_dict({**raw, "dtype": dtype})
    case = resolve(spec)
    for op in ops:
        assert op in case.resolved.source, case.resolved.source
    # built as IR, shown as text: the text parses back to the very program the lifter built
    assert parse(case.resolved.source, inputs=case.program.inputs, params=case.program.param_names) == case.program
    restored = restore(spec, build_case(spec), Resolved.from_dict(case.resolved.to_dict()))
    assert restored.program.statements == case.program.statements and restored.program.reads == case.program.reads
    inputs = case.inputs(make_inputs(spec))
    ev = evaluate(case.program, case.case, case.reference_arrays(inputs))
    check = case.lift_check(inputs, ev)
    assert check["lift_note"] is None and check["lift_check"] < 1e-12 and check["lift_check_over_bound"] < 1e-6


@pytest.mark.parametrize("raw, words", [
    ({"class": "user_norms:CumulativeNorm"}, "op aten.cumprod.default is outside the program language"),
])
def test_an_op_outside_the_language_is_one_line_naming_the_op_and_the_class(raw, words):
    with pytest.raises(CaseProblem) as info:
        Cases().setup(CaseSpec.from_dict({**raw, "dtype": "float32", "shape": [2, 8]}))
    assert info.value.verdict == "unsupported" and words in info.value.message
    assert "user_norms:CumulativeNorm" in info.value.message and "\n" not in info.value.message


def test_a_class_torch_itself_refuses_in_a_dtype_says_so_not_that_the_lift_failed():
    # float32 statistics with float16 weights: the lifted program's check refuses it, and so does torch's
    # CPU layer_norm (export's fake tensors do not), so the line names torch's rule; float32 lifts
    raw = {"class": "user_norms:Float32PinnedLayerNorm", "init": {"normalized_shape": 16}, "shape": [2, 16]}
    with pytest.raises(CaseProblem) as info:
        Cases().setup(CaseSpec.from_dict({**raw, "dtype": "float16"}))
    assert info.value.verdict == "unsupported" and "does not run in eager with a float16 input" in info.value.message
    assert "torch: mixed dtype (CPU)" in info.value.message and "\n" not in info.value.message
    assert "F.layer_norm(" in lifted({**raw, "dtype": "float32"}).resolved.source


def test_a_lift_that_disagrees_with_the_module_in_float64_is_an_error_at_stage_lift():
    from harness.engine.execute import Executor

    record = Executor().execute({"class": "user_norms:DtypeBranchNorm", "dtype": "float32", "shape": [2, 8]}, "eager")
    assert record["verdict"] == "error" and record["stage"] == "lift"
    assert "not trusted" in record["message"] and record["lift_check"] > 0.1


def test_resolved_is_plain_data():
    case = lifted({**LLAMA, "dtype": "float16"})
    assert Resolved.from_dict(case.resolved.to_dict()) == case.resolved


def test_parameters_are_redrawn_under_their_program_names_as_a_program_draws_them():
    from harness.oracle.inputs import draw_named_params

    spec = CaseSpec.from_dict({**LLAMA, "dtype": "float32", "seed": 5})
    weight = lifted(spec.to_dict()).param_arrays()["weight"]
    np.testing.assert_array_equal(weight, draw_named_params("normal", 5, [("weight", (64,))])["weight"].astype(np.float32))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_forward_returning_a_tuple_lifts_to_a_program_returning_each_and_each_is_checked(dtype):
    spec = CaseSpec.from_dict({"class": "user_norms:FusedAddRMSNorm", "init": {"hidden_size": 64}, "shape": [2, 8, 64],
                               "dtype": dtype, "params": {"kind": "normal"}, "inputs": {"residual": {"kind": "normal"}}})
    case = resolve(spec)
    assert len(case.program.statements[-1].values) == 2 and case.resolved.source.splitlines()[-1].count(",") == 1
    assert parse(case.resolved.source, inputs=case.program.inputs, params=case.program.param_names) == case.program
    inputs = case.inputs(make_inputs(spec))
    ev = evaluate(case.program, case.case, case.reference_arrays(inputs))
    assert len(ev.each) == 2 and [e.out_dtype for e in ev.each] == [dtype, dtype]
    check = case.lift_check(inputs, ev)
    assert check["lift_note"] is None and check["lift_check"] < 1e-12 and check["lift_check_over_bound"] < 1e-6
    # a lift that got one output wrong fails the check: the residual's FP64 value shifted by 1%
    from dataclasses import replace

    wrong = replace(ev, outputs=(ev.each[0], replace(ev.each[1], out=ev.each[1].out * 1.01)))
    assert case.lift_check(inputs, wrong)["lift_check_over_bound"] > 1.0
