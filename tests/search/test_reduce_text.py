"""The reducer's renderer: every program of the suites, rendered from its IR, parses back to the same IR."""
import pytest

from cases.suites import suite
from harness.oracle.twins import program_twin
from harness.program.ir import BinOp, Name, Neg, Number, Return
from harness.program.parse import parse
from harness.search.reduce_text import render_expr, render_program
from harness.spec.program_keys import program_case


def _programs():
    seen = {}
    for name in ("smoke", "nearmiss"):
        for spec in suite(name):
            form = spec if spec.program is not None else program_twin(spec)
            if form is not None:
                seen.setdefault(form.program, form)
    return list(seen.values())


def _shape(program):
    return [(type(s).__name__, getattr(s, "name", None), s.value) for s in program.statements]


@pytest.mark.parametrize("spec", _programs(), ids=lambda s: s.case_id)
def test_a_rendered_program_parses_back_to_its_ir(spec):
    program = parse(spec.program, case=program_case(spec))
    again = parse(render_program(program.statements), case=program_case(spec))
    assert _shape(again) == _shape(program)


def test_precedence_is_kept_by_parentheses():
    x, y = Name("x"), Name("y")
    e = BinOp("mul", BinOp("add", x, y), Neg(BinOp("sub", x, Number(-1.0))))
    assert render_expr(e) == "(x + y) * -(x - -1.0)"
    power = BinOp("pow", Neg(x), Number(-0.5))
    assert render_expr(power) == "(-x) ** (-0.5)"
    program = parse(f"return {render_expr(e)} + {render_expr(power)}", inputs=("x", "y"))
    assert program.statements[0] == Return(BinOp("add", e, power), 1)
