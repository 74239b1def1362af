"""The program witnesses: correct float32/float16/bfloat16 arithmetic, torch's bits where torch's order is known."""
import numpy as np
import pytest
import torch

from harness.core.dtypes import np_dtype, ulp
from harness.program import ProgramCase, evaluate
from harness.program import witness_run as W

DTYPES = ["float32", "float16", "bfloat16"]
SEQUENTIAL = W.Accumulation("sequential", "sequential")


def _run(program, source, case, arrays, acc):
    return W.run(program(source, case), case, arrays, acc)[0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise_ops_are_torchs_bits(dtype, program, arrays, eager):
    # a Python number in float32 inside * and /, in the tensor's dtype inside + and - (either side),
    # c / t as reciprocal(t) * c, pow's special cases and a general exponent, casts both ways: nothing
    # is reduced, so every witness is the same and must give eager's very bits
    case = ProgramCase(dtype, (8, 32))
    source = ("h = x * 0.1 + 1e-3\n"
              "g = 3 / (h * h + 1.5) - x.pow(3) + x.pow(2) * 0.5 - (0.3 - x) / 7\n"
              "k = torch.rsqrt(x.square() + 1.0) + (x.abs() + 1).reciprocal()\n"
              "return (g.float() * k.to(torch.float32) - (-h).float()).to(x.dtype) * w + b")
    a = arrays(case, seed=3)
    want, want_dtype = eager(program(source, case), case, a)
    outs = W.outputs(program(source, case), case, a)
    assert len(outs) == 1  # nothing is reduced: every order gives the same bits
    got = outs[0][1]
    assert got.dtype == np_dtype(want_dtype)
    np.testing.assert_array_equal(got.astype(np.float64), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op, exact", [("torch.sqrt(v)", np.sqrt), ("v ** 0.7", lambda v: v ** 0.7)])
def test_roots_and_powers_are_correctly_rounded_and_torchs_within_one_ulp(dtype, op, exact, program, arrays,
                                                                          eager):
    # torch's float32 sqrt and general pow on this CPU (AVX512, Sleef) are off by one ULP on ~16 % of
    # values; the witness's are correctly rounded, a legitimate implementation; in float16/bfloat16 both
    # round the float32 value once
    case = ProgramCase(dtype, (8, 32))
    p = program(f"v = torch.abs(x) + 0.25\nreturn {op}", case)
    a = arrays(case, seed=3)
    want, _ = eager(p, case, a)
    got = W.outputs(p, case, a)[0][1].astype(np.float64)
    if dtype == "float32":
        v = (np.abs(a["x"]) + np.float32(0.25)).astype(np.float64)
        np.testing.assert_array_equal(got, exact(v).astype(np.float32))
        assert np.all(np.abs(got - want) <= ulp(got, "float32"))
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_sequential_sum_is_torchs_own_where_torch_adds_in_order(dtype, program, arrays, eager):
    # torch reduces 16 rows of a contiguous [16, 64] over dim 0 one row after another (a vertical
    # reduction shorter than its cascade's first level), so the sequential witness is eager bit for bit
    case = ProgramCase(dtype, (16, 64))
    source = ("h = x.float()\n"
              "m = h.mean(0, keepdim=True)\n"
              "v = ((h - m) * (h - m)).sum(0, keepdim=True) / 16\n"
              "return ((h - m) * torch.rsqrt(v + eps)).to(x.dtype) * w")
    a = arrays(case, seed=1, offset=100.0)
    want, _ = eager(program(source, case), case, a)
    got = _run(program, source, case, a, SEQUENTIAL)
    np.testing.assert_array_equal(got.astype(np.float64), want)
    # and the float32 sums really are sequential: another order differs somewhere at offset 100
    pairwise = _run(program, source, case, a, W.Accumulation("pairwise"))
    assert not np.array_equal(pairwise.astype(np.float64), want) or dtype != "float32"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("source", [
    "return F.layer_norm(x, (x.shape[-1],), w, b, eps)",
    "return F.rms_norm(x, (x.shape[-1],), w, eps)",
    "return F.group_norm(x, 2, None, None, eps)",
    "h = x.float()\nreturn ((h - h.mean(-1, keepdim=True)) * torch.rsqrt(h.var(-1, keepdim=True, correction=0) + eps)).to(x.dtype)",
])
def test_norms_and_variances_stay_within_the_bound_by_every_order(dtype, source, program, arrays, eager):
    case = ProgramCase(dtype, (4, 8, 96)) if "group" in source else ProgramCase(dtype, (4, 768))
    a = arrays(case, seed=2, offset=3.0)
    p = program(source, case)
    ev = evaluate(p, case, a)
    want, _ = eager(p, case, a)
    outs = W.outputs(p, case, a)
    assert [name for name, _ in outs] == [acc.name for acc in W.WITNESSES]  # a variance: Welford ones too
    for name, got in outs:
        err = np.abs(got.astype(np.float64) - ev.out)
        assert np.all(err <= ev.bound), name
        if dtype != "float32":  # statistics in float32, one rounding: eager's bits up to a last-bit tie
            assert np.mean(got.astype(np.float64) == want) > 0.99, name


def test_a_program_without_a_moment_skips_the_welford_witnesses(program, arrays):
    # a mean of absolute values is no moment; a mean of squares is (harness.program.statistics)
    case = ProgramCase("float16", (4, 64))
    source = "h = x.float()\nreturn (h / (h.abs().mean(-1, keepdim=True) + eps)).to(x.dtype) * w"
    names = [name for name, _ in W.outputs(program(source, case), case, arrays(case))]
    assert names == [acc.name for acc in W.WITNESSES if acc.moments == "two_pass"]
    rms = "h = x.float()\nreturn (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w"
    names = [name for name, _ in W.outputs(program(rms, case), case, arrays(case))]
    assert names == [acc.name for acc in W.WITNESSES]


def test_witnesses_take_the_cases_dtypes_and_default_parameters(program):
    case = ProgramCase("bfloat16", (2, 16), weight_dtype="float32")
    x = (np.arange(32).reshape(2, 16) / 7.0).astype(np_dtype("bfloat16"))
    p = program("return w * (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)",
                case)
    out = W.outputs(p, case, {"x": x})[0][1]  # w not given: ones, as the module's
    assert out.dtype == np.float32  # float32 weight times a bfloat16 value: torch promotes
    module = torch.nn.functional.rms_norm(torch.from_numpy(x.astype(np.float32)), (16,), eps=case.eps)
    np.testing.assert_array_equal(out, module.to(torch.bfloat16).float().numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_op_tables_elementwise_and_shape_ops_need_no_witness_code(dtype, program, arrays, eager):
    # silu, sigmoid, relu come from the op table's NumPy forms, computed in float32 and rounded once;
    # shape ops and cat are its exact NumPy calls. torch's and NumPy's float32 exp are both within an ULP of
    # the exact one, not the same: in float32 both stay within the program's bound
    case = ProgramCase(dtype, (4, 8, 16))
    source = ("h = F.silu(x) + torch.sigmoid(x) * 2 + torch.relu(x)\n"
              "g = h.permute(0, 2, 1).reshape(4, 128).view(4, 8, 16)[:, None, :, :].squeeze(1)\n"
              "k = g.unsqueeze(0).transpose(0, 1).contiguous().narrow(2, 1, 6)\n"
              "return torch.cat([k, k.narrow(2, 0, 2)], -2)")
    a = arrays(case, seed=4)
    p = program(source, case)
    want, _ = eager(p, case, a)
    got = W.outputs(p, case, a)[0][1].astype(np.float64)
    assert got.shape == want.shape
    if dtype == "float32":
        ev = evaluate(p, case, a)
        assert np.all(np.abs(got - ev.out) <= ev.bound) and np.all(np.abs(want - ev.out) <= ev.bound)
        assert np.mean(got == want) > 0.5
    else:
        assert np.mean(got == want) > 0.99  # the float32 value within 1 ULP rounds to the same float16 but at ties


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_linear_layer_is_a_float32_dot_product_in_each_order(dtype, program, arrays):
    case = ProgramCase(dtype, (4, 64), param_shapes={"W": (32, 64), "c": (32,)})
    p = program("h = F.rms_norm(x, (64,), None, eps)\nreturn F.linear(h, W, c)", case)
    a = {**arrays(case, seed=5), "W": np.random.default_rng(6).normal(size=(32, 64)).astype(np_dtype(dtype)),
         "c": np.random.default_rng(7).normal(size=(32,)).astype(np_dtype(dtype))}
    ev = evaluate(p, case, a)
    h = W.run(program("return F.rms_norm(x, (64,), None, eps)", case), case, a, SEQUENTIAL)[0].astype(np.float32)
    products = h[:, None, :] * a["W"].astype(np.float32)[None]
    want = (np.add.accumulate(products, axis=-1, dtype=np.float32)[..., -1] + a["c"].astype(np.float32))
    got = W.run(p, case, a, SEQUENTIAL)[0]
    np.testing.assert_array_equal(got, want.astype(np_dtype(dtype)))
    for name, out in W.outputs(p, case, a):
        assert np.all(np.abs(out.astype(np.float64) - ev.out) <= ev.bound), name


def test_a_var_then_a_mean_of_the_same_tensor_take_one_welford_pass(program, arrays):
    """torch.var_mean as a lifted joint graph writes it (a var, then a mean): a Welford witness returns the mean of
    the var's own pass, as ATen's moments form both (a backward reads that mean); a two-pass one the mean as written."""
    from harness.program.accumulate import moments

    case = ProgramCase("float32", (4, 1000))
    source = "h = x.float()\nv = h.var(-1, keepdim=True, correction=0)\nm = h.mean(-1, keepdim=True)\nreturn m + v * 0"
    a = dict(arrays(case, seed=5))
    a["x"] = (a["x"].astype(np.float64) + 100.0).astype(np.float32)  # an offset: the orders' means part
    welford = W.Accumulation("sequential Welford", "sequential", "welford")
    got = _run(program, source, case, a, welford)
    want = moments(a["x"].astype(np.float32), True, welford)[0]
    np.testing.assert_array_equal(got[:, 0], want)
    two_pass = _run(program, source, case, a, SEQUENTIAL)
    assert not np.array_equal(two_pass, got)
