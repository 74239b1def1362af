"""The pairing rule: canonical ops, the order-preserving alignment with the output anchored, the score."""
import math

import numpy as np
import pytest

from harness.attribution.capture import Capture, Intermediate
from harness.attribution.match import MAX_REL, align, canonical, err_over_bound, pair_weight
from harness.attribution.score import changes_of, entries, first_stage_over, returned
from harness.attribution.stages import ProgramStage


@pytest.mark.parametrize("op, want", [
    ("relax.variance", "var"), ("aten.var.correction", "var"), ("relax.mean", "mean"), ("aten.mean.dim", "mean"),
    ("relax.astype", "cast"), ("aten._to_copy.default", "cast"), ("aten.to.dtype", "cast"),
    ("dim_order_ops._to_dim_order_copy.default", "cast"), ("relax.nn.layer_norm", "layer_norm"),
    ("aten.native_layer_norm.default", "layer_norm"), ("aten._fused_rms_norm.default#rsqrt", "rsqrt"),
    ("relax.power", "pow"), ("aten.pow.Tensor_Scalar", "pow"), ("relax.divide", "div"),
    ("layer_norm.variance", "var"), ("rms_norm.mean_square", "mean"), ("group_norm.rstd", "rsqrt"),
    ("layer_norm", "layer_norm"), ("mul", "mul"),
    ("relax.reshape", None), ("aten.view.default", None), ("relax.permute_dims", None),
    ("aten._assert_tensor_metadata.default", None),
    # OpenVINO's op types (the openvino paths' intermediates)
    ("ReduceMean", "mean"), ("Power", "pow"), ("Divide", "div"), ("Convert", "cast"), ("MVN", "layer_norm"),
    ("RMS", "rms_norm"), ("Multiply", "mul"), ("Sqrt", "sqrt"), ("Subtract", "sub"), ("Reshape", None),
])
def test_canonical_ops(op, want):
    assert canonical(op) == want


def test_unknown_ops_pair_with_nothing():
    assert canonical("relax.nn.log_softmax").startswith("other:")
    v = np.ones((2, 3))
    assert pair_weight(canonical("relax.nn.log_softmax"), v, canonical("relax.nn.log_softmax"), v) is None


def _tvm_seed_like(var_value):
    """Program stages of a decomposed layer_norm and TVM-like intermediates (w = 1: normalize == scale)."""
    x = np.where(np.arange(8) % 2 == 0, -0.25, 0.25).reshape(1, 8)
    z = x / 0.25
    stages = [("mean", np.zeros((1, 1))), ("sub", x), ("var", np.full((1, 1), 0.0625)),
              ("add", np.full((1, 1), 0.0625)), ("sqrt", np.full((1, 1), 0.25)), ("rsqrt", np.full((1, 1), 4.0)),
              ("mul", z), ("mul", z), ("layer_norm", z)]
    bad = z * math.sqrt(0.0625 / var_value)
    inters = [("mean", np.zeros((1, 1))), ("sub", x), ("var", np.full((1, 1), var_value)),
              ("add", np.full((1, 1), var_value)), ("sqrt", np.full((1, 1), math.sqrt(var_value))),
              ("div", bad), ("mul", bad), ("add", bad)]
    return stages, inters


def test_alignment_of_a_decomposed_norm_keeps_program_order():
    stages, inters = _tvm_seed_like(0.03125)  # the variance lost half its value, as on the seed
    pairs = align(stages, inters, output=7)
    # mean, centered, variance, +eps, sqrt on their own ops; rstd was never computed; the division
    # is the normalize and the multiply the scale (not swapped, though the multiply has normalize's op)
    assert pairs == {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 6: 5, 7: 6, 8: 7}


def test_a_far_value_pairs_only_on_its_own_op():
    x = np.linspace(1.0, 2.0, 8)
    assert pair_weight("mul", x, "div", x * (1 + 2 * MAX_REL)) is None
    assert pair_weight("mul", x, "mul", x * 10) is not None
    assert pair_weight("mul", x, "div", x * (1 + MAX_REL / 2)) is not None
    assert pair_weight("var", np.ones((2, 1)), "var", np.ones((2, 2))) is None  # shapes must agree


def test_a_whole_norm_stands_for_the_elementwise_stage_it_equals():
    h = np.linspace(-1, 1, 16).reshape(2, 8)
    stages = [("cast", h), ("pow", h * h), ("mean", (h * h).mean(-1, keepdims=True)), ("mul", h * 3), ("mul", h * 3)]
    inters = [("cast", h), ("rms_norm", h * 3), ("mul", h * 3)]
    assert align(stages, inters, output=2) == {0: 0, 3: 1, 4: 2}


def test_err_over_bound():
    ref = np.array([1.0, 2.0, np.inf])
    assert err_over_bound(ref, np.array([0.1, 0.1, np.inf]), np.array([1.05, 2.0, 5.0])) == pytest.approx(0.5)
    assert err_over_bound(ref, 0.1, np.array([1.0, np.nan, 0.0])) == math.inf  # not finite where ref is
    assert err_over_bound(np.array([1.0]), 0.0, np.array([1.0])) == 0.0
    assert err_over_bound(np.array([1.0]), 0.0, np.array([1.5])) == math.inf


def _stage(label, op, dtype, value, err, part=False):
    return ProgramStage(label, op, dtype, np.asarray(value, dtype=np.float64), np.asarray(err, dtype=np.float64), part)


def test_entries_and_the_first_stage_over():
    stages = [_stage("h:cast", "cast", "float32", [1.0, 2.0], 0.0),
              _stage("return:layer_norm.mean", "mean", "float32", [1.5], 1e-6, part=True),
              _stage("h:mul", "mul", "float32", [2.0, 4.0], 1e-6),
              _stage("return:cast", "cast", "float16", [2.0, 4.0], 1e-3)]
    inters = [Intermediate("a", "aten._to_copy.default", "float32", np.array([1.0, 2.0], np.float32)),
              Intermediate("v", "aten.view.default", "float32", np.array([1.0, 2.0], np.float32)),
              Intermediate("m", "aten.mul.Tensor", "float16", np.array([2.0, 4.01], np.float16)),
              Intermediate("o", "aten._to_copy.default", "float32", np.array([2.0, 4.01], np.float32))]
    capture = Capture(inters, 3, np.array([2.0, 4.01], np.float32), "test")
    out = entries(stages, capture, approximate=False)
    # the unpaired norm part is left out; the view is no computation
    assert [e["stage"] for e in out] == ["h:cast", "h:mul", "return:cast"]
    assert [e["dtype"] for e in out] == ["float32", "float16", "float32"]
    assert out[1]["over"] and out[1]["max_err_over_tol"] > 1000 and out[1]["node"] == "m = aten.mul.Tensor"
    assert first_stage_over(out, "inaccurate") == "h:mul"
    assert first_stage_over(out, "dtype_mismatch") == "h:mul"  # float16 where the program has float32
    assert first_stage_over(out[2:], "dtype_mismatch") == "return:cast"
    assert first_stage_over(out[:1], "inaccurate") is None


def test_each_output_is_the_last_intermediate_with_its_bits():
    """The reader names the first output; the others (and the first, where a reader names none, as TVM's tuple
    return) are found by the exact bits the re-run returned, the last such intermediate winning."""
    a, b = np.arange(4, dtype=np.float16), np.arange(4, dtype=np.float16) * 2
    values = [b, a, b.astype(np.float32), b.copy()]  # the float32 copy has b's values, not its bits
    inters = [Intermediate(f"v{i}", "aten.mul.Tensor", str(v.dtype), v) for i, v in enumerate(values)]
    assert returned(Capture(inters, 1, (a, b), "test")) == [1, 3]
    assert returned(Capture(inters, None, (a, b), "test")) == [1, 3]
    assert returned(Capture(inters, 1, (a, b + 1), "test")) == [1, None]  # not among them: not anchored
    assert returned(Capture(inters, 1, a, "test")) == [1]  # one output: the reader's index alone


def test_several_anchors_replace_the_last_stage_s():
    """`return y, r` computed r last: each output's stage is anchored to its own intermediate, the rest aligned."""
    stages = [("mul", np.ones(4)), ("cast", np.ones(4)), ("add", np.ones(4))]  # y = mul (output 0), r = add then cast
    inters = [("mul", np.ones(4)), ("add", np.ones(4)), ("cast", np.ones(4))]
    assert align(stages, inters, 0) == {2: 0, 0: 1, 1: 2}  # the last stage anchored to the first output: all askew
    assert align(stages, inters, 0, anchors={0: 0, 1: 2}) == {0: 0, 1: 2, 2: 1}
    assert align(stages, inters, None) == align(stages, inters, None, anchors={})


def test_entries_anchor_each_output_s_stage_to_the_value_the_graph_returns_for_it():
    two = np.array([2.0, 4.0], np.float32)
    stages = [_stage("y:mul", "mul", "float32", [2.0, 4.0], 1e-6)._replace(returns=0),
              _stage("h:add", "add", "float32", [3.0, 5.0], 1e-6),
              _stage("return:cast", "cast", "float32", [3.0, 5.0], 1e-6)._replace(returns=1)]
    h = np.array([3.0, 5.0], np.float32)
    inters = [Intermediate("m", "aten.mul.Tensor", "float32", two), Intermediate("a", "aten.add.Tensor", "float32", h),
              Intermediate("c", "aten._to_copy.default", "float32", h.copy())]
    out = entries(stages, Capture(inters, 0, (two, h), "test"), approximate=False)
    assert [e["node"] for e in out] == ["m = aten.mul.Tensor", "a = aten.add.Tensor", "c = aten._to_copy.default"]
    assert not any(e["over"] for e in out)


def test_a_rerun_that_differs_makes_the_attribution_approximate():
    out = np.array([1.0, 2.0], np.float16)
    same = Capture([], None, out.copy(), "test")
    assert changes_of(same, out) == []
    other = Capture([], None, np.array([1.0, 2.001], np.float16), "test")
    assert "differs from the path's" in changes_of(other, out)[0]
    assert changes_of(Capture([], None, None, "test", ["a fusion undone"]), out)[0] == "a fusion undone"
