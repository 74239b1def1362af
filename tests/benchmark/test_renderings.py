"""Renderings: the program run by the witness walker, each knob changing one thing."""
import numpy as np
import pytest

from cases import nearmiss
from harness.benchmark.renderings import Rendering, render
from harness.core.dtypes import cast, np_dtype
from harness.program import ProgramCase, evaluate, parse
from harness.program import witness_run as W
from harness.program.styles import style_program

LAYER = "return F.layer_norm(x, (x.shape[-1],), w, b, eps)"


def _arrays(case, offset=0.0, std=1.0, seed=0):
    rng = np.random.default_rng(seed)
    out = {n: (rng.normal(size=case.shape) * std + offset).astype(np_dtype(case.dtype)) for n in case.inputs}
    out.update({n: rng.normal(size=case.param_shapes[n]).astype(np_dtype(case.weight_dtype)) for n in ("w", "b")})
    return out


def _go(source, case, arrays, **knobs):
    return render(parse(source, case=case), case, arrays, Rendering(**knobs))


@pytest.mark.parametrize("source", [nearmiss.QWEN, LAYER, style_program("layer_norm", "manual")])
def test_the_default_rendering_is_the_pairwise_witness(source):
    case = ProgramCase("float16", (4, 256))
    a = _arrays(case, offset=2.0)
    p = parse(source, case=case)
    np.testing.assert_array_equal(render(p, case, a, Rendering()), W.run(p, case, a, W.Accumulation("pairwise"))[0])


def test_exact_is_the_fp64_value_rounded_once_and_its_neighbours():
    case = ProgramCase("bfloat16", (4, 64))
    a = _arrays(case)
    p = parse(nearmiss.QWEN, case=case)
    exact = cast(evaluate(p, case, a).out, "bfloat16")
    np.testing.assert_array_equal(render(p, case, a, Rendering(exact=True)), exact)
    up = render(p, case, a, Rendering(exact=True, ulp_step=1))
    np.testing.assert_array_equal(up, np.nextafter(exact, np.array(np.inf, dtype=exact.dtype)))
    assert (up.astype(np.float64) > exact.astype(np.float64)).all()


def test_statistics_in_the_input_dtype_overflow_where_float32_does_not():
    case = ProgramCase("float16", (4, 256))
    a = _arrays(case, offset=1000.0)  # 256 values near 1000 sum past float16's 65,504
    assert np.isfinite(_go(LAYER, case, a).astype(np.float64)).all()
    assert not np.isfinite(_go(LAYER, case, a, stats_in_input=True).astype(np.float64)).all()
    # a written-out mean in float16 (the manual style) too
    manual = style_program("layer_norm", "manual")
    assert not np.isfinite(_go(manual, case, a, stats_in_input=True).astype(np.float64)).all()


def test_casts_dropped_change_the_dtype_or_the_arithmetic():
    case = ProgramCase("float16", (4, 64))
    a = _arrays(case)
    assert _go(nearmiss.QWEN, case, a, drop_cast_back=True, keep_dtype=False).dtype == np.float32
    big = _arrays(case, std=300.0)  # squares past float16's range once the upcast is gone: rsqrt(inf) = 0
    assert (np.abs(_go(nearmiss.QWEN, case, big).astype(np.float64)) > 1e-3).mean() > 0.9
    assert not _go(nearmiss.QWEN, case, big, drop_upcast=True).astype(np.float64).any()
    early = _go(nearmiss.QWEN, case, a, cast_back_early=True)
    assert early.dtype == np.float16 and not np.array_equal(early, _go(nearmiss.QWEN, case, a))


def test_wrong_dims_normalize_along_the_dim_before():
    case = ProgramCase("float32", (8, 16))
    a = _arrays(case)
    got = _go(LAYER, case, a, wrong_dims=True).astype(np.float64)
    x = a["x"].astype(np.float64)
    d = x - x.mean(0, keepdims=True)
    want = d / np.sqrt((d * d).mean(0, keepdims=True) + case.eps) * a["w"] + a["b"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    qwen = _go(nearmiss.QWEN, case, a, wrong_dims=True).astype(np.float64)
    want = a["w"] * x / np.sqrt((x * x).mean(0, keepdims=True) + case.eps)
    np.testing.assert_allclose(qwen, want, rtol=1e-5)


def test_variance_knobs_are_the_formulas_they_name():
    case = ProgramCase("float32", (4, 512))
    a = _arrays(case, offset=300.0)
    x = a["x"].astype(np.float64)
    m = x.mean(-1, keepdims=True)
    unbiased = (x - m) / np.sqrt(((x - m) ** 2).sum(-1, keepdims=True) / 511 + case.eps) * a["w"] + a["b"]
    np.testing.assert_allclose(_go(LAYER, case, a, unbiased=True), unbiased, rtol=1e-4, atol=1e-4)
    # E[x²] - E[x]² at offset 300: float32 cancels away digits the two-pass keeps
    exact = (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + case.eps) * a["w"] + a["b"]
    one_pass = np.abs(_go(LAYER, case, a, one_pass=True) - exact).max()
    assert one_pass > 100 * np.abs(_go(LAYER, case, a) - exact).max()
    outside = _go(LAYER, case, _arrays(case, std=1e-3), norm_eps="outside")
    assert not np.allclose(outside, _go(LAYER, case, _arrays(case, std=1e-3)), rtol=1e-2)


def test_the_count_flush_and_weight_knobs():
    case = ProgramCase("bfloat16", (2, 1023))  # 1023 rounds to 1024 in bfloat16
    a = _arrays(case, offset=1.0)
    qwen = parse(nearmiss.QWEN, case=case)
    base = render(qwen, case, a, Rendering()).astype(np.float64)
    counted = render(qwen, case, a, Rendering(count_in_input=True)).astype(np.float64)
    assert not np.array_equal(base, counted)
    sub = ProgramCase("float16", (2, 64))
    tiny = {**_arrays(sub), "x": (np.full((2, 64), 3e-6)).astype(np.float16)}  # float16 subnormals
    assert not render(parse(nearmiss.QWEN, case=sub), sub, tiny, Rendering(flush_subnormals=True)).any()
    mixed = ProgramCase("float16", (2, 64), weight_dtype="float32")
    m = _arrays(mixed)
    through = render(parse(nearmiss.QWEN, case=mixed), mixed, m, Rendering(weight_through="bfloat16"))
    np.testing.assert_array_equal(through, render(parse(nearmiss.QWEN, case=mixed), mixed,
                                                  {**m, "w": cast(cast(m["w"], "bfloat16"), "float32")}, Rendering()))


def test_an_approximate_rsqrt_is_off_by_its_relative_error():
    case = ProgramCase("float32", (4, 64))
    a = _arrays(case)
    got = _go(nearmiss.QWEN, case, a, rsqrt_rel_error=2.0 ** -12).astype(np.float64)
    base = _go(nearmiss.QWEN, case, a).astype(np.float64)
    np.testing.assert_allclose(got / base, 1 - 2.0 ** -12, rtol=2e-7)
