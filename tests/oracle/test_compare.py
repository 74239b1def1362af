"""The comparator: seed numbers flagged, correctly rounded outputs pass."""
import numpy as np
import pytest

from harness.oracle.inputs import make_inputs
from harness.oracle.compare import score
from harness.core.dtypes import cast, np_dtype, ulp
from harness.oracle.reference import reference
from harness.spec import CaseSpec

SEED = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
                           "input": {"kind": "alternating", "amplitude": 0.25}})


def seed_ref():
    return reference(SEED, make_inputs(SEED))


def test_seed_numbers_are_inaccurate():
    ref = seed_ref()
    eager = cast(ref.out, "float16")  # ±1, what eager and TVM without the rewrite give
    decomposed = np.where(ref.out < 0, -1.4140625, 1.4140625).astype(np.float16)
    s = score(decomposed, ref, eager)
    assert s.verdict == "inaccurate"
    assert s.max_abs_err == pytest.approx(1.4140625 - 0.25 / np.sqrt(0.0625 + 1e-5), abs=1e-12)
    assert s.max_abs_err == pytest.approx(0.414, abs=1e-3)
    assert s.worst_row == 0 and s.max_ulp > 400
    assert score(eager, ref, eager).verdict == "pass"
    assert score(eager, ref).verdict == "pass"  # eager itself, against the bound alone


def noisy(ref, dtype, seed):
    """The correctly rounded output moved by up to one ULP at random."""
    exact = cast(ref.out, dtype).astype(np.float64)
    step = np.random.default_rng(seed).integers(-1, 2, exact.shape)
    out = exact + step * ulp(exact, dtype)
    return cast(out, dtype)


SPECS = [
    {"pattern": "layer_norm", "shape": [8, 4096]},
    {"pattern": "layer_norm", "style": "manual", "shape": [4, 300]},
    {"pattern": "rms_norm", "style": "qwen", "shape": [4, 2048], "params": {"kind": "normal"}},
    {"pattern": "rms_norm", "style": "gemma", "shape": [4, 64], "input": {"kind": "outlier", "std": 1, "scale": 50}},
    {"pattern": "group_norm", "shape": [2, 8, 6, 6], "groups": 4, "params": {"kind": "normal"}},
    {"pattern": "batch_norm", "shape": [4, 3, 5], "params": {"kind": "normal"}},
    {"pattern": "layer_norm", "shape": [2, 64], "input": {"kind": "offset", "offset": 100, "std": 1}},
]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("raw", SPECS, ids=lambda r: f"{r['pattern']}-{r.get('style', 'module')}")
def test_correctly_rounded_output_with_one_ulp_noise_passes(raw, dtype):
    spec = CaseSpec.from_dict({**raw, "dtype": dtype})
    ref = reference(spec, make_inputs(spec))
    out = noisy(ref, ref.out_dtype, 1)
    s = score(out, ref)  # against the bound alone, as for eager
    assert s.verdict == "pass", s.message
    assert s.max_ulp <= 2.5 + 1e-9  # 1.5 ULPs of the rounded value, twice that just under a power of two
    assert score(out, ref, cast(ref.out, ref.out_dtype)).verdict == "pass"


def test_a_float32_output_for_a_float16_norm_is_a_dtype_mismatch():
    ref = seed_ref()
    s = score(ref.out.astype(np.float32), ref, cast(ref.out, "float16"))
    assert s.verdict == "dtype_mismatch" and s.out_dtype == "float32" and s.expected_dtype == "float16"
    assert s.max_abs_err < 1e-6  # the values are fine; the dtype is not


def test_shape_mismatch():
    ref = seed_ref()
    s = score(cast(ref.out, "float16").reshape(4096), ref, cast(ref.out, "float16"))
    assert s.verdict == "shape_mismatch" and "[4096]" in s.message


def test_nonfinite_is_blamed_only_where_eager_is_finite():
    ref = seed_ref()
    good = cast(ref.out, "float16")
    bad = good.copy()
    bad[0, 3] = np.nan
    assert score(bad, ref, good).verdict == "nonfinite"
    assert score(bad, ref).verdict == "nonfinite"
    assert score(bad, ref, bad.copy()).verdict == "pass"  # eager shares it


def test_an_error_eager_shares_is_not_blamed_on_the_compiler():
    ref = seed_ref()
    off = (ref.out * 1.01).astype(np.float16)  # 1 % off: far over the bound
    assert score(off, ref).verdict == "inaccurate" and score(off, ref).unstable  # eager would be unstable
    assert score(off, ref, off.copy()).verdict == "pass"
    assert "unstable" in score(off, ref, off.copy()).message
    worse = (ref.out * 1.05).astype(np.float16)
    assert score(worse, ref, off).verdict == "inaccurate"  # clearly worse than eager


def test_worse_than_eager_is_judged_element_by_element_in_units_of_the_bound():
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [1, 256]})
    ref = reference(spec, make_inputs(spec))
    exact = cast(ref.out, "float16")
    big, small = int(np.argmax(np.abs(ref.out))), int(np.argmin(np.abs(ref.out)))
    eager = exact.copy()
    eager[0, big] = np.nextafter(eager[0, big], np.float16(np.inf * np.sign(ref.out[0, big])))  # 1 ULP off a big value
    compiled = exact.copy()
    eager_abs = abs(float(eager[0, big]) - ref.out[0, big])
    compiled[0, small] = np.float16(ref.out[0, small] + 0.5 * eager_abs)  # smaller in absolute terms, huge in ULPs
    assert abs(float(compiled[0, small]) - ref.out[0, small]) < eager_abs
    s = score(compiled, ref, eager)
    assert s.verdict == "inaccurate", s.message


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_ulp_matches_the_dtype_spacing_including_zero_and_subnormals(dtype):
    dt = np_dtype(dtype)
    values = np.array([0.0, 1.0, 0.999, 3.0, 1e-30, 6e-8, 1e4], dtype=np.float64)
    finite = cast(values, dtype)
    nxt = np.array([np.nextafter(v, np.array(np.inf, dtype=dt)) for v in finite], dtype=dt)
    expected = nxt.astype(np.float64) - finite.astype(np.float64)
    np.testing.assert_array_equal(ulp(finite.astype(np.float64), dtype), expected)


def test_an_error_under_the_bound_far_beyond_correct_float32_accumulation_is_inaccurate():
    # eps dropped from a float32 layer_norm over 4096 elements: 5e-6 relative, under the
    # bound's accumulation allowance, but many times what a float32 implementation errs by
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 4096]})
    inputs = make_inputs(spec)
    ref = reference(spec, inputs)
    x = inputs.x.astype(np.float64).reshape(2, 4096)
    d = x - x.mean(1, keepdims=True)
    no_eps = cast(d / np.sqrt((d * d).mean(1, keepdims=True)), "float32")
    s = score(no_eps, ref, cast(ref.out, "float32"))
    assert s.verdict == "inaccurate" and s.max_err_over_tol < 1, s.message
    assert "beyond what correct float32 implementations achieve" in s.message
    assert score(no_eps, ref).verdict == "pass"  # eager is held to the bound alone


def test_an_error_a_correct_float32_implementation_also_makes_is_not_blamed():
    # a row where sequential float32 rounding adds up coherently: an output as accurate as
    # the sequential Welford witness is over the bound, and still not a compiler's bug
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "bfloat16", "shape": [2, 4096],
                               "input": {"kind": "offset", "offset": 1000, "std": 1}, "seed": 3})
    inputs = make_inputs(spec)
    ref = reference(spec, inputs)
    from harness.oracle.witness import statistics
    mean, var = statistics(ref.stats_rows, centered=True)[1]
    x = inputs.x.astype(np.float64).reshape(2, 4096)
    welford = cast((x - mean[:, None]) / np.sqrt(var.astype(np.float64)[:, None] + spec.eps), "bfloat16")
    s = score(welford, ref, cast(ref.out, "bfloat16"))
    assert s.verdict == "pass" and s.max_err_over_tol > 1, s.message
    assert "of what eager or a correct float32 implementation achieves there" in s.message
