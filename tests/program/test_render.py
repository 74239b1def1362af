"""The renderer: IR -> program text, which parses back to the very IR (parse(render_program(p)) == p)."""
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings

from harness.program import ProgramError, parse
from harness.program.ir import Assign, BinOp, Name, Neg, Number, Return, Unary
from harness.program.render import names_read, program_from_ir, render_expr, render_program
from harness.program.styles import CASTS, STYLE_PATTERNS, style_program
from harness.search.programs import skeleton_source, skeletons


def _round_trip(source: str, **kw):
    """A parsed program p, and q = parse(render_program(p)): the same statements (lines aside), and q a fixed point."""
    p = parse(source, **kw)
    q = parse(render_program(p.statements), inputs=p.inputs, params=p.param_names)
    assert [dataclasses.replace(s, line=0) for s in q.statements] == [dataclasses.replace(s, line=0)
                                                                     for s in p.statements]
    assert q.reads == p.reads
    assert parse(render_program(q.statements), inputs=q.inputs, params=q.param_names) == q
    return p, q


def _style_sources():
    """Every catalog style's program under every cast it takes, in a reduced and a mixed dtype pair."""
    styles = sorted(STYLE_PATTERNS.items()) + [("module", "layer_norm"), ("module", "rms_norm")]
    for style, pattern in styles:
        for cast in (None,) + CASTS:
            for dtypes in (("float16", "float16"), ("bfloat16", "float32")):
                try:
                    source = style_program(pattern, style, cast, None, *dtypes)
                except ValueError:  # a style that writes no cast
                    continue
                yield pytest.param(source, id=f"{style}-{pattern}-{cast}-{dtypes[0]}-{dtypes[1]}")


@pytest.mark.parametrize("source", list(_style_sources()))
def test_every_style_program_renders_back_to_itself(source):
    _round_trip(source)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(skeletons())
def test_the_fuzzers_programs_render_back_to_themselves(sk):
    _round_trip(skeleton_source(sk), inputs=("x", "y"))


@pytest.mark.parametrize("source", [
    "return (x - x.mean(-1, keepdim=True)) * torch.rsqrt(x.var(-1, keepdim=True, correction=0) + eps)",
    "return x ** 2 ** 3",
    "return (x ** 2) ** 3",
    "return -x ** 2",
    "return (-x) ** 2",
    "return 2.0 ** -x",
    "return x - (y - x)",
    "return x / (y * x) / 3",
    "return -(x + y) * -2.5",
    "return x.to(torch.float32, memory_format=torch.contiguous_format).to(x.dtype).type_as(y)",
    "return x.float().half().bfloat16()",
    "return (x + 1)[:, None][..., None].squeeze(1, 2).narrow(0, x.shape[0] - 1, 1)",
    "return torch.cat([x, y], -1).view(x.shape[0], 2 * x.shape[1]).sum()",
    "return F.linear(x, w) + F.linear(x, w, b) + F.silu(torch.sigmoid(x.abs()))",
    "return F.group_norm(x, x.shape[1], w, None) + F.group_norm(x, 2, None, None, 1e-3)",
    "return F.layer_norm(x, (x.shape[-1],)) + F.rms_norm(x, (64,), w, None) + F.rms_norm(x, [64])",
    "h = x.mean(dim=[0, 1], keepdim=False)\nreturn x * h.reshape(1, 1) + torch.sqrt(eps)",
])
def test_the_languages_forms_render_back_to_themselves(source):
    _round_trip(source, inputs=("x", "y"))


def test_parentheses_go_where_precedence_needs_them_and_nowhere_else():
    x, y = Name("x"), Name("y")
    assert render_expr(BinOp("pow", Number(-2.0), x)) == "(-2.0) ** x"
    assert render_expr(BinOp("pow", Neg(x), y)) == "(-x) ** y"
    assert render_expr(Neg(BinOp("pow", x, y))) == "-x ** y"
    assert render_expr(BinOp("sub", x, BinOp("sub", y, x))) == "x - (y - x)"
    assert render_expr(BinOp("sub", BinOp("sub", x, y), x)) == "x - y - x"
    assert render_expr(BinOp("mul", BinOp("add", x, y), Unary("rsqrt", BinOp("add", y, Number(1e-05))))) \
        == "(x + y) * torch.rsqrt(y + 1e-05)"


def test_a_program_built_as_ir_is_what_its_source_parses_to():
    statements = (Assign("h", BinOp("mul", Name("x"), Name("gamma")), 7),
                  Return(BinOp("add", Name("h"), Name("y")), 9))
    p = program_from_ir(statements, inputs=("x", "y"), params=("gamma", "w"))
    assert p.source == "h = x * gamma\nreturn h + y"
    assert [s.line for s in p.statements] == [1, 2]
    assert p.reads == ("x", "y", "gamma") and p.params == ("gamma",) and p.extra_inputs == ("y",)
    assert parse(p.source, inputs=p.inputs, params=p.param_names) == p
    assert names_read(statements[0].value) == {"x", "gamma"}


def test_a_number_without_a_literal_and_a_program_over_the_limit_are_refused():
    with pytest.raises(ValueError):
        render_expr(Number(float("inf")))
    long = tuple(Assign(f"h{i}", BinOp("add", Name("x"), Number(i)), i) for i in range(2000))
    with pytest.raises(ProgramError, match="longer than"):
        program_from_ir(long + (Return(Name("x"), 2001),))
