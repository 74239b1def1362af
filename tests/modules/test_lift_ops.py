"""The lifter's handlers build IR; a statistic is recognised by the node that computes it, not by its name."""
import torch

from harness.modules.lift_ops import Lifter, Val
from harness.program.ir import BinOp, Name, Reduce


def _lifter():
    lf = Lifter("test:Norm", ep=None)
    lf.assign("centre", Reduce("mean", Name("x"), (-1,), True))  # a mean, under a name that does not say so
    lf.assign("total", Reduce("sum", Name("x"), (-1,), True))
    lf.assign("mean_like", BinOp("mul", Name("x"), Name("x")))  # named like a mean, and not one
    lf.assign("variance", Reduce("var", Name("x"), (-1,), True, 0))
    return lf


def test_a_mean_or_a_sum_is_a_statistic_by_its_reduce_node():
    lf, meta = _lifter(), torch.empty(2, 1)
    assert lf.is_statistic(Val("centre", meta)) and lf.is_statistic(Val("total", meta))
    assert not lf.is_statistic(Val("mean_like", meta)) and not lf.is_statistic(Val("variance", meta))
    assert not lf.is_statistic(Val("mean_weight", meta))  # a parameter, whatever its name
    assert not lf.is_statistic(2.0)


def test_statements_are_ir_numbered_in_order():
    lf = _lifter()
    assert [s.line for s in lf.statements] == [1, 2, 3, 4]
    assert lf.statements[0].value == Reduce("mean", Name("x"), (-1,), True)
