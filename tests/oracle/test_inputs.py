"""Inputs and parameters: drawn in float64, rounded, bit-identical everywhere; each input kind has the
property it is documented to stress, in the dtypes it targets; a program's extra inputs draw from their own streams."""
import dataclasses
import hashlib
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import harness.oracle.inputs as inputs_module
from cases import nearmiss
from harness.core.dtypes import DTYPES
from harness.oracle.inputs import KINDS, describe, make_inputs, outlier_count
from harness.oracle.reference import reference
from harness.spec import INPUT_KINDS, CaseSpec


def digest(inputs) -> str:
    h = hashlib.sha256(inputs.x.tobytes())
    for k in sorted(inputs.params):
        h.update(k.encode() + inputs.params[k].tobytes())
    return h.hexdigest()[:16]


SPEC = CaseSpec.from_dict({"pattern": "rms_norm", "style": "qwen", "dtype": "bfloat16", "shape": [2, 8, 64],
                           "params": {"kind": "normal"}, "seed": 3})


def test_inputs_are_rounded_to_the_case_dtypes():
    inputs = make_inputs(SPEC)
    assert inputs.x.dtype == np.dtype(ml_dtypes.bfloat16) and inputs.x.shape == (2, 8, 64)
    assert inputs.params["weight"].dtype == np.dtype(ml_dtypes.bfloat16)
    mixed = make_inputs(SPEC.replace(weight_dtype="float32"))
    assert mixed.params["weight"].dtype == np.float32


def test_same_spec_same_bytes_in_another_process():
    code = ("from harness.oracle.inputs import make_inputs; from harness.spec import CaseSpec; "
            "from tests.oracle.test_inputs import SPEC, digest; print(digest(make_inputs(SPEC)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == digest(make_inputs(SPEC))
    assert digest(make_inputs(SPEC.replace(seed=4))) != digest(make_inputs(SPEC))


def test_golden_bytes_do_not_drift():
    # If NumPy ever changes its PCG64 normal stream, every recorded case changes: fail loudly.
    x = make_inputs(CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [4]})).x
    assert x.tolist() == [0.1257302165031433, -0.13210485875606537, 0.6404226422309875, 0.10490011423826218]


def test_alternating_is_minus_plus_around_the_offset():
    x = make_inputs(CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [1, 6],
                                        "input": {"kind": "alternating", "amplitude": 0.25, "offset": 2}})).x
    assert x.astype(float).tolist() == [[1.75, 2.25, 1.75, 2.25, 1.75, 2.25]]


def test_extra_inputs_draw_from_their_own_streams():
    raw = nearmiss.spec_of(nearmiss.get("scaled-not-squared"), "float16")
    a = make_inputs(CaseSpec.from_dict(raw))
    b = make_inputs(CaseSpec.from_dict({**raw, "inputs": {"y": {"kind": "uniform"}}}))
    assert set(a.extra) == {"y"} and a.extra["y"].dtype == a.x.dtype and a.extra["y"].shape == a.x.shape
    np.testing.assert_array_equal(a.x, b.x)  # x does not move when y's input changes
    assert not np.array_equal(a.extra["y"], b.extra["y"]) and not np.array_equal(a.x, a.extra["y"])
    assert a.run_arg[0] is a.x and a.run_arg[1] is a.extra["y"]


FP16_MAX = 65504.0
FP16_MIN_NORMAL = 2.0**-14


def case(kind, dtype="float16", shape=(8, 512), pattern="layer_norm", seed=0, **params):
    return CaseSpec.from_dict({"pattern": pattern, "dtype": dtype, "shape": list(shape), "seed": seed,
                               "input": {"kind": kind, **params}})


def x_of(spec):
    return make_inputs(spec).x


def test_every_kind_is_implemented_and_says_what_it_stresses():
    assert set(KINDS) == set(INPUT_KINDS)
    for kind, defaults in INPUT_KINDS.items():
        doc = describe(kind)
        assert doc.startswith(kind + "(") and len(doc) > 60, kind  # its parameters, then what it stresses
        assert all(name in doc.splitlines()[0] for name in defaults), kind
    assert "65,504" in inputs_module.__doc__  # long rows are documented with the kinds


@pytest.mark.parametrize("kind", sorted(INPUT_KINDS))
def test_every_parameter_of_a_kind_is_used(kind):
    base = x_of(case(kind, "float32", shape=(4, 64)))
    for name, default in INPUT_KINDS[kind].items():
        changed = x_of(case(kind, "float32", shape=(4, 64), **{name: default / 2 + 0.25}))
        assert changed.tobytes() != base.tobytes(), f"{kind}.{name} changes nothing"


@pytest.mark.parametrize("kind", sorted(INPUT_KINDS))
def test_every_kind_is_deterministic_finite_and_rounded(kind):
    for dtype in DTYPES:
        spec = case(kind, dtype)
        a, b = x_of(spec), x_of(spec)
        assert a.tobytes() == b.tobytes() and a.dtype == np.dtype(
            ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
        assert np.isfinite(a.astype(np.float64)).all()
        assert np.isfinite(reference(spec, make_inputs(spec)).out).all()


@pytest.mark.parametrize("kind", ["normal", "uniform", "outlier", "offset", "overflow", "tiny", "subnormal"])
def test_random_kinds_change_with_the_seed(kind):
    assert x_of(case(kind)).tobytes() != x_of(case(kind, seed=1)).tobytes()


def test_normal_has_its_mean_and_std():
    x = x_of(case("normal", "float32", shape=(4, 16384), mean=2.0, std=0.5)).astype(np.float64)
    assert abs(x.mean() - 2.0) < 0.01 and abs(x.std() - 0.5) < 0.01


def test_uniform_stays_in_its_bounds():
    x = x_of(case("uniform", "float32", low=-1.0, high=3.0)).astype(np.float64)
    assert x.min() >= -1.0 and x.max() <= 3.0 and abs(x.mean() - 1.0) < 0.05


@pytest.mark.parametrize("dtype, amplitude, offset", [("float16", 0.25, 0.0), ("float16", 1.0, 1000.0),
                                                      ("bfloat16", 1.0, 100.0), ("float32", 1.0, 80000.0)])
def test_alternating_rows_have_mean_offset_and_variance_amplitude_squared(dtype, amplitude, offset):
    spec = case("alternating", dtype, shape=(3, 4096), amplitude=amplitude, offset=offset)
    x = x_of(spec).astype(np.float64)
    assert set(np.unique(x)) == {offset - amplitude, offset + amplitude}
    assert (x.mean(axis=1) == offset).all() and np.allclose(x.var(axis=1), amplitude**2, rtol=0, atol=0)
    # the cancellation it stresses: E[x²] carries (offset/amplitude)² times the variance
    ref = reference(spec, make_inputs(spec))
    assert np.allclose(ref.kappa, np.sqrt(offset**2 + amplitude**2) / np.sqrt(amplitude**2 + spec.eps))


@pytest.mark.parametrize("dtype", DTYPES)
def test_constant_rows_have_zero_variance_so_layer_norm_gives_its_bias(dtype):
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": dtype, "shape": [4, 64],
                               "params": {"kind": "normal"}, "input": {"kind": "constant", "value": 0.1}})
    inputs = make_inputs(spec)
    x = inputs.x.astype(np.float64)
    assert (x == x[0, 0]).all() and x[0, 0] != 0.1  # 0.1 is not representable: the mean must be exact
    ref = reference(spec, inputs)
    np.testing.assert_array_equal(ref.out, np.broadcast_to(inputs.params["bias"].astype(np.float64), (4, 64)))
    assert (ref.kappa > 30).all()  # |x|/sqrt(eps): any error in the mean is amplified ~32x


@pytest.mark.parametrize("pattern, shape, axis", [("rms_norm", (6, 256), 1), ("group_norm", (4, 32, 8), 1),
                                                  ("layer_norm", (2, 3, 64), 2)])
def test_outlier_has_a_few_large_channels_the_same_in_every_row(pattern, shape, axis):
    spec = case("outlier", "float16", shape=shape, pattern=pattern, std=1.0, scale=100.0)
    x = np.abs(x_of(spec).astype(np.float64))
    other = tuple(a for a in range(len(shape)) if a != axis)
    channel_max = x.max(axis=other)
    big = np.flatnonzero(channel_max > 20.0)
    assert len(big) == outlier_count(shape[axis]) and 1 <= len(big) <= 4
    # every row's outlier channels dominate its sum of squares
    sq = np.moveaxis(x**2, axis, -1)
    assert (sq[..., big].sum(-1) > 0.9 * sq.sum(-1)).mean() > 0.9


@pytest.mark.parametrize("dtype, offset", [("float16", 1000.0), ("bfloat16", 100.0), ("float32", 80000.0)])
def test_offset_is_a_large_mean_with_a_small_spread(dtype, offset):
    spec = case("offset", dtype, shape=(4, 4096), offset=offset, std=1.0)
    x = x_of(spec).astype(np.float64)
    assert np.allclose(x.mean(axis=1), offset, atol=0.1) and np.allclose(x.std(axis=1), 1.0, atol=0.1)
    ref = reference(spec, make_inputs(spec))
    assert np.allclose(ref.kappa, offset, rtol=0.1)  # the conditioning it stresses


def test_overflow_squares_and_sums_overflow_float16_but_the_output_is_benign():
    spec = case("overflow", "float16", shape=(4, 512), magnitude=300.0)
    x = x_of(spec)
    assert np.isfinite(x).all() and np.abs(x).max() <= 300
    with np.errstate(over="ignore"):
        squares = x * x  # in float16
        assert np.isinf(squares).mean() > 0.2  # |x| > 256 for about 29%
        assert np.isinf(np.add.reduce(np.abs(x), axis=1, dtype=np.float16)).all()  # the row sums too
    ref = reference(spec, make_inputs(spec))
    assert np.isfinite(ref.out).all() and np.abs(ref.out).max() < 2.0


def test_tiny_is_subnormal_in_float16_and_its_squares_underflow():
    spec = case("tiny", "float16", pattern="rms_norm", scale=1e-6)
    x = x_of(spec)
    xa = np.abs(x.astype(np.float64))
    assert (xa < FP16_MIN_NORMAL).all() and (xa > 0).mean() > 0.9
    assert (x * x == 0).all()  # squared in float16, every one underflows
    ref = reference(spec, make_inputs(spec))
    assert ((x.astype(np.float64) ** 2).mean(axis=1) < spec.eps).all()  # eps dominates the denominator
    assert np.isfinite(ref.out).all() and np.abs(ref.out).max() > 1e-3


@pytest.mark.parametrize("dtype", DTYPES)
def test_subnormal_gives_subnormals_of_the_case_dtype(dtype):
    info = ml_dtypes.finfo(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.finfo(dtype)
    smallest_normal = float(info.smallest_normal)
    spec = case("subnormal", dtype, pattern="rms_norm", fraction=1.0)
    x = x_of(spec).astype(np.float64)
    assert (x != 0).all() and (np.abs(x) < smallest_normal).all()
    assert len(np.unique(np.abs(x))) > 50  # spread over the subnormal range, not one value
    ref = reference(spec, make_inputs(spec))
    np.testing.assert_allclose(ref.out, x / np.sqrt((x**2).mean(axis=1, keepdims=True) + spec.eps), rtol=1e-12)
    half = x_of(case("subnormal", dtype, fraction=0.5)).astype(np.float64)
    assert 0.4 < (np.abs(half) < smallest_normal).mean() < 0.6


def test_a_long_row_over_65504_elements_overflows_a_float16_count():
    spec = case("normal", "float16", shape=(1, 65536))
    ref = reference(spec, make_inputs(spec))
    with np.errstate(over="ignore"):
        assert ref.row_len > FP16_MAX and np.isinf(np.float16(ref.row_len))


def test_cotangents_draw_from_their_own_stream_one_per_output_after_the_inputs():
    from harness.oracle.inputs import draw_cotangents

    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "bfloat16", "shape": [4, 16], "grad": True,
                               "cotangent": {"kind": "uniform", "low": -2.0, "high": 2.0}})
    types = (((4, 16), "bfloat16"), ((4, 16), "float32"))
    first, second = draw_cotangents(spec, types)
    assert first.dtype == ml_dtypes.bfloat16 and second.dtype == np.float32 and first.shape == (4, 16)
    assert np.all(np.abs(second) <= 2.0) and not np.array_equal(first.astype(np.float32), second)
    again = draw_cotangents(spec, types)
    assert all(np.array_equal(a, b) for a, b in zip(again, (first, second)))  # deterministic
    inputs = make_inputs(spec)
    forward = make_inputs(CaseSpec.from_dict({k: v for k, v in spec.to_dict().items()
                                              if k not in ("grad", "cotangent")}))
    assert np.array_equal(inputs.x, forward.x)  # the input's stream is untouched
    with_cotangents = dataclasses.replace(inputs, cotangents=(first,))
    x, dy = with_cotangents.run_arg  # the cotangents after the inputs
    assert x is inputs.x and dy is first and with_cotangents.forward_arg == (inputs.x,)
