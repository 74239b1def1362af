"""The gradient benchmark: an outcome per gradient of each implementation, judged by normdiff, the ground truth
(correct implementations only: eager is no oracle for gradients) and the anchors, a float32 run's among them."""
from harness.benchmark import anchors, bench, gradient_bench, gradient_implementations
from harness.spec import CaseSpec


def test_the_grid_is_gradient_cases_of_layer_rms_and_group_norm_on_many_and_long_rows():
    specs = gradient_bench.cases()
    assert all(s.grad and s.dtype in ("float16", "bfloat16") for s in specs)
    assert {s.pattern for s in specs} == {"layer_norm", "rms_norm", "group_norm"}
    assert max(s.shape[0] for s in specs) >= 4096 and max(s.shape[-1] for s in specs) >= 4096
    assert {s.input_dict["kind"] for s in specs} == {"normal", "offset", "outlier"}


def test_a_case_scores_each_gradient_of_each_implementation():
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "bfloat16", "shape": [2048, 96], "grad": True,
                               "params": {"kind": "normal"}})
    outcomes = bench.collect([spec], names=gradient_implementations.register_all(), run=gradient_bench.run_case)
    by = {o.implementation: o for o in outcomes}
    assert {o.implementation.rpartition(" ")[2] for o in outcomes} == {"d_x", "d_weight", "d_bias"}
    correct = [o for o in outcomes if o.kind == "correct"]
    assert correct and not any(o.flags[bench.NORMDIFF] for o in correct)
    summed = by[gradient_implementations.PREFIX + "weight-sum-in-dtype d_bias"]  # bfloat16 over 2,048 rows
    assert summed.kind == "wrong" and summed.flags[bench.NORMDIFF]
    assert set(summed.flags) == {bench.NORMDIFF, *anchors.ANCHORS, gradient_bench.FLOAT32_RUN}
    assert bench.summary(outcomes, bench.GRADIENTS).startswith("oracle-check gradients: detected ")
