"""The comparator: seed numbers flagged, correctly rounded outputs pass."""
import numpy as np
import pytest

from harness.oracle.inputs import make_inputs
from harness.oracle import compare
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
    from harness.oracle.witness_error import statistics
    mean, var = statistics(ref.stats_rows, centered=True)[1]
    x = inputs.x.astype(np.float64).reshape(2, 4096)
    welford = cast((x - mean[:, None]) / np.sqrt(var.astype(np.float64)[:, None] + spec.eps), "bfloat16")
    s = score(welford, ref, cast(ref.out, "bfloat16"))
    assert s.verdict == "pass" and s.max_err_over_tol > 1, s.message
    assert "of what eager or a correct float32 implementation achieves there" in s.message


# -- programs: held to their witnesses, in units of the running bound ----------------------------------

def _program(style="qwen", dtype="float32", shape=(2, 4096), pattern="rms_norm", **raw):
    from harness.oracle.twins import program_twin

    spec = program_twin(CaseSpec.from_dict({"pattern": pattern, "style": style, "dtype": dtype,
                                            "shape": list(shape), **raw}))
    inputs = make_inputs(spec)
    return spec, inputs, reference(spec, inputs)


def _witness(spec, inputs, sums, moments="two_pass"):
    from harness.program import parse
    from harness.program import witness_run as W
    from harness.spec import program_case

    case = program_case(spec)
    return W.run(parse(spec.program, case=case), case, {**inputs.arrays, **inputs.params},
                 W.Accumulation(sums, sums, moments))[0]


def test_a_program_error_under_its_bound_far_beyond_its_witnesses_is_inaccurate():
    # eps dropped from a float32 layer norm written out over 4096 elements: 5e-6 relative, well under
    # the program's √n bound, and many times what the program run by any float32 order errs by
    spec, inputs, ref = _program("upcast", pattern="layer_norm", params={"kind": "normal"})
    x = inputs.x.astype(np.float64)
    d = x - x.mean(1, keepdims=True)
    p = {k: v.astype(np.float64) for k, v in inputs.params.items()}
    no_eps = cast(d / np.sqrt((d * d).mean(1, keepdims=True)) * p["w"] + p["b"], "float32")
    eager = _witness(spec, inputs, "pairwise")
    s = score(no_eps, ref, eager)
    assert s.verdict == "inaccurate" and s.max_err_over_tol < 1, s.message
    assert "beyond what correct float32 implementations achieve" in s.message
    assert "per unit of the bound" in s.message and "the float32 witnesses'" in s.message
    assert score(no_eps, ref).verdict == "pass"  # eager is held to the bound alone


def test_an_error_under_the_floor_is_not_blamed_whatever_it_is():
    # eps dropped from an rms norm (eps 1e-6): 5e-7 relative on unit rows, less than one standard
    # deviation of a sequential float32 sum's random walk over 4096 terms (FLOOR x the bound)
    spec, inputs, ref = _program()
    x = inputs.x.astype(np.float64)
    no_eps = cast(inputs.params["w"].astype(np.float64) * x / np.sqrt((x * x).mean(1, keepdims=True)), "float32")
    s = score(no_eps, ref, _witness(spec, inputs, "pairwise"))
    assert s.verdict == "pass" and s.max_err_over_tol < compare.FLOOR, s.message


def test_a_correct_sequential_sum_over_the_program_bound_is_not_blamed():
    # the alarm: on constant float32 rows a sum added left to right drifts coherently, 1.29x
    # the program's bound; the sequential witness makes that very error, so it is no compiler's bug
    spec, inputs, ref = _program(input={"kind": "constant", "value": 0.1})
    sequential = _witness(spec, inputs, "sequential")
    eager = _witness(spec, inputs, "pairwise")
    s = score(sequential, ref, eager)
    assert s.verdict == "pass" and s.max_err_over_tol > 1, s.message
    assert "of what eager or a correct float32 implementation achieves there" in s.message
    # before: over the bound and 100x eager's error there, so the bound-and-eager rule alone flags it
    import dataclasses

    blind = dataclasses.replace(ref, witness_outputs=lambda: ())
    assert score(sequential, blind, eager).verdict == "inaccurate"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_a_correctly_rounded_program_output_with_one_ulp_noise_passes(dtype):
    spec, inputs, ref = _program(dtype=dtype, shape=(4, 256), params={"kind": "normal"})
    out = noisy(ref, ref.out_dtype, 2)
    s = score(out, ref, cast(ref.out, ref.out_dtype))
    assert s.verdict == "pass", s.message


def test_a_program_no_witness_can_run_falls_back_on_the_bound_and_eager():
    import dataclasses

    spec, inputs, ref = _program(shape=(4, 256))
    eager = cast(ref.out, "float32")
    blind = dataclasses.replace(ref, witness_outputs=lambda: ())
    off = cast(ref.out * (1 + 3e-3), "float32")  # far over the bound
    s = score(off, blind, eager)
    assert s.verdict == "inaccurate" and "over the bound and worse than 2x eager" in s.message
    assert compare.measured_tolerance(blind) is None
    tol = compare.measured_tolerance(ref)
    assert tol.shape == ref.out.shape and np.all(tol > 0) and np.all(tol <= compare.tolerance(ref) * 2)

