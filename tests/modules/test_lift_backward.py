"""A norm's backward lifted from torch's joint graph: the program computes what float64 autograd computes, keeps
the saved statistics in float32, and returns each gradient in its kernel's dtype, rounded once."""
import numpy as np
import pytest
import torch

from harness.core.tensors import to_numpy
from harness.modules.lift_backward import float64_gradients, lift_backward
from harness.modules.load import Unliftable
from harness.oracle.backward import Backward
from harness.program import evaluate
from harness.program.ir import Assign, Cast, Reduce

MODULES = {
    "layer_norm": (lambda: torch.nn.LayerNorm(64), (16, 64)),
    "group_norm": (lambda: torch.nn.GroupNorm(2, 8), (4, 8, 16)),
    "rms_norm": (lambda: torch.nn.RMSNorm(64), (16, 64)),
    "batch_norm": (lambda: torch.nn.BatchNorm1d(8).eval(), (16, 8)),
    "instance_norm": (lambda: torch.nn.InstanceNorm1d(8, affine=True), (4, 8, 16)),
}


def _case(kind, dtype=torch.float16):
    make, shape = MODULES[kind]
    torch.manual_seed(0)
    module = make().to(dtype)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_()
    x, dy = torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)
    backward = Backward(module, 1)
    return backward, (x, dy), lift_backward(backward, (x, dy), ("x",), kind, str(dtype)[6:], str(dtype)[6:])


@pytest.mark.parametrize("kind", sorted(MODULES))
def test_the_lifted_backward_is_float64_autograd_of_the_module(kind):
    backward, example, lifted = _case(kind)
    run_arg = tuple(to_numpy(t) for t in example)
    ev = evaluate(lifted.program, lifted.case, lifted.arrays(run_arg, backward.forward_module))
    exact, why = float64_gradients(backward, run_arg)
    assert why is None and len(ev.each) == len(exact) == 1 + len(list(backward.forward_module.parameters()))
    for e, g in zip(ev.each, exact):
        # the RMSNorm's eps=None is float32's eps in the program, float64's in its float64 twin
        assert np.abs(e.out - g).max() <= 1e-6 * np.abs(g).max()
        assert np.abs(e.out - g).max() <= 1e-3 * e.bound.max()  # the lift check's LIFT_SHARE
    eager = backward(*example)
    assert [e.out_dtype for e in ev.each] == [str(t.dtype)[6:] for t in eager]  # the kernel's dtypes


def _statements(program):
    return [s for s in program.statements if isinstance(s, Assign)]


@pytest.mark.parametrize("kind", ["layer_norm", "group_norm", "instance_norm"])
def test_the_saved_statistics_stay_in_float32_and_each_gradient_is_rounded_once(kind):
    """torch's CPU kernels save mean and rstd in float16; the correct implementation the bound is in units of
    keeps them in float32 (docs/gradients.md): the only casts to float16 are the three gradients' own."""
    _, _, lifted = _case(kind)
    narrowed = [s for s in _statements(lifted.program) if isinstance(s.value, Cast)
                and getattr(s.value.to, "name", None) == "float16"]
    assert len(narrowed) == 3


def test_the_weight_and_bias_gradients_sum_over_the_rows_in_float32():
    _, _, lifted = _case("layer_norm")
    sums = [s.value for s in _statements(lifted.program) if isinstance(s.value, Reduce) and s.value.dims == (0,)]
    assert len(sums) == 2  # d_weight and d_bias: sums over dim 0, the rows
    source = lifted.source
    assert "dy.to(torch.float32" in source  # the cotangent upcast before any product


def test_an_op_outside_the_language_is_unliftable():
    class Sorted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(8))

        def forward(self, x):
            return torch.sort(x, dim=-1).values * self.weight

    x = torch.randn(4, 8)
    with pytest.raises(Unliftable, match="outside the program language"):
        lift_backward(Backward(Sorted(), 1), (x, torch.randn(4, 8)), ("x",), "Sorted", "float32", "float32")
