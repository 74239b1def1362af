"""A catalog case's program twin: the same bits as the style case, on eager and through compiled paths."""
from __future__ import annotations

import pytest

from cases.suites import suite
from harness.engine.execute import Executor
from harness.oracle.twins import program_twin
from harness.spec import CaseSpec


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
def test_twins_give_the_same_bits_through_compiled_paths(path, session_cache):
    ex = Executor(session_cache)
    for spec, twin in _twins()[:6]:
        a, b = ex.execute(spec, path), ex.execute(twin, path)
        assert a["verdict"] == b["verdict"], (str(spec), a["message"], b["message"])
        assert a["verdict"] == "error" or a["max_abs_err"] == pytest.approx(b["max_abs_err"], rel=1e-9, abs=1e-12)
