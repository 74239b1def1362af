"""IR rewrites: value-preserving ones keep the FP64 value, breaking ones change the one construct they name."""
import numpy as np
import pytest

from cases import nearmiss
from harness.benchmark import rewrites
from harness.core.dtypes import np_dtype
from harness.program import ProgramCase, evaluate, parse
from harness.program.ir import Norm, Reduce
from harness.program.styles import style_program

CASE = ProgramCase("float32", (4, 64))
QWEN = nearmiss.QWEN


def _arrays(case=CASE, seed=0):
    rng = np.random.default_rng(seed)
    out = {n: rng.normal(0.5, 1.0, case.shape).astype(np_dtype(case.dtype)) for n in case.inputs}
    out.update({n: rng.normal(size=case.param_shapes[n]).astype(np_dtype(case.weight_dtype)) for n in ("w", "b", "s")})
    return out


def _fp64(program, case=CASE, arrays=None):
    return evaluate(program, case, arrays or _arrays(case), keep_stages=False).out


def _nodes(program, kind):
    found = []
    for stmt in program.statements:
        rewrites.transform(stmt.value, lambda n: found.append(n) if isinstance(n, kind) else None)
    return found


def test_transform_rebuilds_only_what_changes():
    p = parse(QWEN, case=CASE)
    same = [rewrites.transform(s.value, lambda n: None) for s in p.statements]
    assert all(a is s.value for a, s in zip(same, p.statements))


@pytest.mark.parametrize("fn", ["rsqrt_as_reciprocal_sqrt", "multiply_as_divide"])
@pytest.mark.parametrize("source", [QWEN, style_program("rms_norm", "llama"), style_program("rms_norm", "gemma"),
                                    nearmiss.get("used-twice").program])
def test_value_preserving_rewrites_keep_the_fp64_value(fn, source):
    p = parse(source, case=CASE)
    q, sites = getattr(rewrites, fn)(p)
    assert sites >= 1 and q != p
    np.testing.assert_allclose(_fp64(q), _fp64(p), rtol=1e-12, atol=0)


def test_eps_moves_across_the_root_both_ways():
    p = parse(QWEN, case=CASE)
    q, sites = rewrites.eps_moved(p)
    assert sites == 1
    a = _arrays()
    h = a["x"].astype(np.float64)
    want = a["w"] * (h / (np.sqrt((h * h).mean(-1, keepdims=True)) + CASE.eps))
    np.testing.assert_allclose(_fp64(q, arrays=a), want, rtol=1e-12)
    outside = parse(nearmiss.get("eps-outside").program, case=CASE)
    back, sites = rewrites.eps_moved(outside)
    assert sites == 1
    np.testing.assert_allclose(_fp64(back, arrays=a), _fp64(p, arrays=a), rtol=1e-12)


def test_eps_dropped_reaches_written_out_and_functional_norms():
    q, sites = rewrites.eps_dropped(parse(QWEN, case=CASE))
    assert sites == 1 and "eps" not in str(q.statements)
    f, sites = rewrites.eps_dropped(parse(style_program("layer_norm", "upcast"), case=CASE))
    assert sites == 1 and _nodes(f, Norm)[0].eps.value == 0.0


def test_the_weight_and_bias_are_dropped_wherever_they_are_applied():
    for source in (QWEN, style_program("rms_norm", "gemma"), style_program("layer_norm", "upcast"),
                   style_program("layer_norm", "manual")):
        q, sites = rewrites.weight_dropped(parse(source, case=CASE))
        assert sites == 1, source
    q, _ = rewrites.weight_dropped(parse(QWEN, case=CASE))
    a = _arrays()
    h = a["x"].astype(np.float64)
    np.testing.assert_allclose(_fp64(q, arrays=a), h / np.sqrt((h * h).mean(-1, keepdims=True) + CASE.eps),
                               rtol=1e-12)
    assert rewrites.bias_dropped(parse(QWEN, case=CASE))[1] == 0
    assert rewrites.bias_dropped(parse(style_program("layer_norm", "manual"), case=CASE))[1] == 1


def test_the_weight_moves_before_the_cast_back():
    case = ProgramCase("float16", (4, 64), weight_dtype="float32")
    p = parse(QWEN, case=case)
    q, sites = rewrites.weight_before_cast(p)
    assert sites == 1
    # float32 weight times the float16 cast promotes to float32; applied first, the cast makes it float16
    assert evaluate(p, case, _arrays(case)).out_dtype == "float32"
    assert evaluate(q, case, _arrays(case)).out_dtype == "float16"
    llama = parse(style_program("rms_norm", "llama", x_dtype="float16", weight_dtype="float32"), case=case)
    assert rewrites.weight_before_cast(llama)[1] == 1  # through the name the cast was assigned to
    assert rewrites.weight_before_cast(parse(style_program("rms_norm", "gemma"), case=case))[1] == 0


def test_the_scaled_tensor_is_swapped_only_where_it_is_not_the_squared_one():
    case = ProgramCase("float32", (4, 64), extra_inputs=("y",))
    assert rewrites.scaled_swapped(parse(QWEN, case=CASE))[1] == 0
    assert rewrites.scaled_swapped(parse(style_program("rms_norm", "llama"), case=CASE))[1] == 0
    near = parse(nearmiss.get("scaled-not-squared").program, case=case)
    q, sites = rewrites.scaled_swapped(near)
    assert sites == 1
    a = _arrays(case)
    np.testing.assert_allclose(_fp64(q, case, a), _fp64(parse(QWEN, case=case), case, a), rtol=1e-12)
    unshifted = parse(nearmiss.get("layer-norm-unshifted-scale").program, case=CASE)
    q, sites = rewrites.scaled_swapped(unshifted)
    assert sites == 1  # scales h - m, the tensor whose squares it averages: a layer norm


def test_one_pass_variance_and_the_unbiased_mean_of_squares():
    manual = parse(style_program("layer_norm", "manual"), case=CASE)
    q, sites = rewrites.one_pass_variance(manual)
    assert sites == 1
    np.testing.assert_allclose(_fp64(q), _fp64(manual), rtol=1e-9)  # the same in exact arithmetic
    assert rewrites.one_pass_variance(parse(QWEN, case=CASE))[1] == 0
    q, sites = rewrites.mean_square_unbiased(parse(QWEN, case=CASE))
    assert sites == 1 and [r.op for r in _nodes(q, Reduce)] == [rewrites.MEAN_UNBIASED]
    q, sites = rewrites.mean_square_unbiased(parse(nearmiss.get("sum-over-n").program, case=CASE))
    assert sites == 1


def test_the_scaled_tensor_can_be_held_in_float16():
    p = parse(QWEN, case=CASE)
    q, sites = rewrites.scaled_through_float16(p)
    assert sites == 1
    # the FP64 value keeps no rounding; the stages show the float16 buffer, and the bound pays for it
    before, after = evaluate(p, CASE, _arrays()), evaluate(q, CASE, _arrays())
    assert "float16" in [s.dtype for s in after.stages if s.op == "cast"]
    np.testing.assert_allclose(after.out, before.out, rtol=1e-12)
    assert np.all(after.bound > 100 * before.bound)
    one_over = parse(nearmiss.get("one-over-sqrt").program, case=CASE)
    assert rewrites.scaled_through_float16(one_over)[1] == 1  # h, not the 1 of 1 / sqrt
