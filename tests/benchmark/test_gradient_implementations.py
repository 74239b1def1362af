"""The gradient benchmark's implementations: paths that train, each a bug class where it applies, unsupported
where it cannot (a float32 input, a row length whose reciprocal is exact)."""
import numpy as np
import pytest

from harness.benchmark import gradient_implementations as G
from harness.engine.cases import Cases
from harness.paths.base import Unsupported
from harness.spec import CaseSpec


def _spec(**over):
    return CaseSpec.from_dict({"pattern": "rms_norm", "dtype": "float16", "shape": [8, 96], "grad": True,
                               "params": {"kind": "normal"}, **over})


def test_an_implementation_trains_and_returns_a_gradient_per_input_and_parameter():
    spec = _spec()
    setup = Cases().setup(spec)
    got = G.TwoPass().prepare(spec, *setup.build()).run(setup.inputs.run_arg)
    assert [g.shape for g in got] == [(8, 96), (96,)] and all(g.dtype == np.float16 for g in got)
    assert G.GradImplementation.trains and set(G.CORRECT).isdisjoint(G.WRONG)


@pytest.mark.parametrize("cls, over", [(G.WeightSumInDtype, {"dtype": "float32"}),
                                       (G.InvNInDtype, {"shape": [8, 64]}), (G.TwoNInDtype, {"shape": [8, 64]})])
def test_a_bug_class_that_cannot_apply_is_unsupported(cls, over):
    spec = _spec(**over)
    with pytest.raises(Unsupported):
        cls().prepare(spec, *Cases().setup(spec).build())
