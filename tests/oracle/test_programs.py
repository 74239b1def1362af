"""Programs through the oracle: their inputs, their module, their reference, and twins of styles."""
from __future__ import annotations

import numpy as np
import pytest

from cases import nearmiss
from cases.suites import suite
from harness.spec import CaseSpec
from harness.engine.execute import Executor
from harness.oracle.inputs import make_inputs
from harness.oracle.reference import reference
from harness.oracle.twins import program_twin


def test_extra_inputs_draw_from_their_own_streams():
    raw = nearmiss.spec_of(nearmiss.get("scaled-not-squared"), "float16")
    a = make_inputs(CaseSpec.from_dict(raw))
    b = make_inputs(CaseSpec.from_dict({**raw, "inputs": {"y": {"kind": "uniform"}}}))
    assert set(a.extra) == {"y"} and a.extra["y"].dtype == a.x.dtype and a.extra["y"].shape == a.x.shape
    np.testing.assert_array_equal(a.x, b.x)  # x does not move when y's input changes
    assert not np.array_equal(a.extra["y"], b.extra["y"]) and not np.array_equal(a.x, a.extra["y"])
    assert a.run_arg[0] is a.x and a.run_arg[1] is a.extra["y"]


def test_a_program_reference_carries_its_own_bound_and_stages():
    spec = CaseSpec.from_dict(nearmiss.spec_of(nearmiss.get("qwen"), "float16"))
    ref = reference(spec, make_inputs(spec))
    assert ref.out_dtype == "float16" and ref.bound is not None and ref.bound.shape == ref.out.shape
    assert np.all(ref.bound > 0) and [s[0] for s in ref.stages][:2] == ["h", "v"]
    assert ref.row_len == 64 and int(ref.rows.max()) == 3


def _twins():
    return [(s, program_twin(s)) for s in suite("smoke") if program_twin(s) is not None]


@pytest.mark.parametrize("spec,twin", _twins(), ids=lambda v: str(v)[:60] if isinstance(v, CaseSpec) else "")
def test_a_style_case_and_its_program_twin_agree_on_eager(spec, twin):
    ex = Executor()
    a, b = ex.execute(spec, "eager"), ex.execute(twin, "eager")
    assert a["verdict"] == b["verdict"] and a["out_dtype"] == b["out_dtype"]
    # the same output bits: the two FP64 references differ only in float64 rounding (1e-15 at |out| ~ 1)
    assert a["max_abs_err"] == pytest.approx(b["max_abs_err"], rel=1e-9, abs=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("path", ["tvm", "executorch", "executorch-recompose"])
def test_twins_give_the_same_bits_through_compiled_paths(path):
    ex = Executor()
    for spec, twin in _twins()[:6]:
        a, b = ex.execute(spec, path), ex.execute(twin, path)
        assert a["verdict"] == b["verdict"], (str(spec), a["message"], b["message"])
        assert a["verdict"] == "error" or a["max_abs_err"] == pytest.approx(b["max_abs_err"], rel=1e-9, abs=1e-12)
