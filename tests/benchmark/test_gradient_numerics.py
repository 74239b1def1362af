"""The gradient benchmark's NumPy backward: its float64 recipe is torch's float64 autograd, its float32 recipes
agree with it to float32 rounding in every order, and each wrong knob moves the gradient it is about."""
import numpy as np
import pytest
import torch

from harness.benchmark.gradient_numerics import GradRecipe, Layout, backward

RNG = np.random.default_rng(0)
MODULES = {"layer_norm": lambda c: torch.nn.LayerNorm(c), "rms_norm": lambda c: torch.nn.RMSNorm(c, eps=1e-6),
           "group_norm": lambda c: torch.nn.GroupNorm(4, c)}
SHAPES = {"layer_norm": (512, 96), "rms_norm": (512, 96), "group_norm": (16, 8, 48)}


def _case(pattern, dtype=np.float16, offset=0.0):
    shape = SHAPES[pattern]
    x = (RNG.normal(size=shape) + offset).astype(dtype)
    dy = RNG.normal(size=shape).astype(dtype)
    module = MODULES[pattern](shape[1] if pattern == "group_norm" else shape[-1]).double()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.from_numpy(RNG.normal(size=p.shape).astype(dtype).astype(np.float64)))
    params = {n: p.detach().numpy().astype(dtype) for n, p in module.named_parameters()}
    xt = torch.from_numpy(x.astype(np.float64)).requires_grad_(True)
    grads = torch.autograd.grad(module(xt), [xt, *module.parameters()], torch.from_numpy(dy.astype(np.float64)))
    eps = 1e-6 if pattern == "rms_norm" else 1e-5
    return Layout(pattern, eps, 4), x, dy, params, [g.numpy() for g in grads]


@pytest.mark.parametrize("pattern", list(MODULES))
def test_the_float64_recipe_is_float64_autograd_rounded_once_and_float32_ones_agree(pattern):
    layout, x, dy, params, want = _case(pattern)
    exact = backward(GradRecipe(acc="float64"), layout, x, dy, params.get("weight"), params.get("bias"))
    for got, w in zip(exact, want):
        np.testing.assert_array_equal(got, w.astype(np.float16))
    for recipe in (GradRecipe(), GradRecipe(sums="sequential"), GradRecipe(stats="welford"),
                   GradRecipe(form="var_path", sums="sequential")):
        got = backward(recipe, layout, x, dy, params.get("weight"), params.get("bias"))
        for g, w in zip(got, want):  # float32 arithmetic: a few float16 ULPs at most
            assert np.abs(g.astype(np.float64) - w).max() <= 4 * 2.0 ** -11 * np.abs(w).max()


def test_each_wrong_knob_moves_the_gradient_it_is_about():
    layout, x, dy, params, want = _case("layer_norm", offset=100.0)
    w, b = params["weight"], params["bias"]
    right = backward(GradRecipe(), layout, x, dy, w, b)

    def err(recipe, k):
        return np.abs(backward(recipe, layout, x, dy, w, b)[k].astype(np.float64) - want[k]).max()

    base = [np.abs(r.astype(np.float64) - t).max() for r, t in zip(right, want)]
    assert err(GradRecipe(weight_sum_in_dtype=True), 2) > 4 * base[2]       # d_bias summed in float16
    assert err(GradRecipe(saved_in_dtype=("mean", "rstd")), 0) > 4 * base[0]  # d_x from float16 statistics
    assert err(GradRecipe(backward_in_dtype=True), 2) > 4 * base[2]        # its sums in float16 too
    # float16 row sums of 96 terms, and 1/96 in float16 (2.4e-4 relative): they move d_x, by about an ULP here
    for recipe in (GradRecipe(row_sums_in_dtype=True), GradRecipe(inv_n_in_dtype=True)):
        assert not np.array_equal(backward(recipe, layout, x, dy, w, b)[0], right[0])
