"""Parsing norm programs: what is accepted, the IR it gives, and one-line errors for the rest."""
import pytest

from harness.program import ProgramCase, ProgramError, check, parse
from harness.program.ir import (
    BinOp,
    Cast,
    DType,
    DTypeOf,
    Name,
    Norm,
    Number,
    Reduce,
    Return,
    ShapeOf,
    Unary,
)

QWEN = """
h = x.to(torch.float32)
v = h.pow(2).mean(-1, keepdim=True)
return w * (h * torch.rsqrt(v + eps)).to(x.dtype)
"""
CASE = ProgramCase("float16", (4, 64), eps=1e-6)


def error_of(source, **kw):
    with pytest.raises(ProgramError) as info:
        parse(source, **kw)
    message = str(info.value)
    assert "\n" not in message and message.startswith("program")
    return message


REJECTED = [
    ("import os\nreturn x", "program line 1: import is not allowed"),
    ("from os import system\nreturn x", "program line 1: import is not allowed"),
    ("h = x\nreturn __import__('os').system('ls')", "program line 2: name '__import__' is not allowed"),
    ("h = x\nreturn os.system('ls')", "program line 2: call of 'os.system' is not allowed"),
    ("return x.__class__", "program line 1: attribute '__class__' is not allowed"),
    ("h = x\nh2 = h\nreturn x.grad", "program line 3: attribute 'x.grad' is not allowed"),
    ("return x.foo()", "program line 1: call of 'x.foo' is not allowed"),
    ("return torch.exp(x)", "program line 1: call of 'torch.exp' is not allowed"),
    ("return F.log_softmax(x, -1)", "program line 1: call of 'F.log_softmax' is not allowed"),
    ("return eval('x')", "program line 1: call of 'eval' is not allowed"),
    ("for i in x:\n    pass\nreturn x", "program line 1: for loop is not allowed"),
    ("while True:\n    pass\nreturn x", "program line 1: while loop is not allowed"),
    ("if x:\n    pass\nreturn x", "program line 1: if statement is not allowed"),
    ("with x:\n    pass\nreturn x", "program line 1: with statement is not allowed"),
    ("def f():\n    return x\nreturn x", "program line 1: def is not allowed"),
    ("return x\nreturn x", "program line 2: a second return"),
    ("return x\nh = x", "program line 2: statement after the return"),
    ("h = x", "program: no return"),
    ("", "program: no return"),
    ("return x.mean(-1, foo=True)", "program line 1: keyword 'foo' is not allowed for mean"),
    ("return x.var(-1, unbiased=True)", "program line 1: keyword 'unbiased' is not allowed for var"),
    ("return x + y", "program line 1: name 'y' is not available"),
    ("return h\nh = x", "program line 1: name 'h' is read before it is assigned"),
    ("return x + z", "program line 1: name 'z' is not allowed"),
    ("return lambda: x", "program line 1: lambda is not allowed"),
    ("return [v for v in x]", "program line 1: comprehension is not allowed"),
    ("return f'{x}'", "program line 1: f-string is not allowed"),
    ("return (h := x)", "program line 1: walrus (:=) is not allowed"),
    ("return x.mean(*[-1])", "program line 1: starred argument is not allowed"),
    ("h = x\nh += 1\nreturn h", "program line 2: augmented assignment is not allowed"),
    ("x = x * 2\nreturn x", "program line 1: assignment to reserved name 'x' is not allowed"),
    ("w = 2\nreturn x", "program line 1: assignment to reserved name 'w' is not allowed"),
    ("torch = 2\nreturn x", "program line 1: assignment to reserved name 'torch' is not allowed"),
    ("eps = 2\nreturn x", "program line 1: assignment to reserved name 'eps' is not allowed"),
    ("F = 2\nreturn x", "program line 1: assignment to reserved name 'F' is not allowed"),
    ("return x[0]", "program line 1: subscript is not allowed"),
    ("return x.shape[n] * x", "program line 1: index of x.shape must be an int literal"),
    ("return x % 2", "program line 1: operator '%' is not allowed"),
    ("return x * True", "program line 1: True is not allowed here"),
    ("return x * None", "program line 1: None is not allowed here"),
    ("return x * 'a'", "program line 1: string is not allowed"),
    ("return x * 1j", "program line 1: complex number is not allowed"),
    ("return x.dtype", "program line 1: 'x.dtype' is allowed only as the dtype argument of .to()"),
    ("return x.to(torch.float64)", "program line 1: the dtype of .to() must be"),
    ("return x.to(torch.float32, memory_format=torch.channels_last)",
     "program line 1: memory_format must be torch.contiguous_format"),
    ("return x.mean(keepdim=1)", "program line 1: keepdim must be True or False"),
    ("return x.mean(-1, True, 2)", "program line 1: too many positional arguments for mean"),
    ("a = 1; b = 2\nreturn x", "program line 1: more than one statement on a line"),
    ("return x if x else x", "program line 1: conditional expression is not allowed"),
    ("return x, (x, x)", "program line 1: tuple is not allowed here"),  # several outputs, never nested
    ("return (x,)", "program line 1: a return of fewer than two values is not a tuple of outputs"),
    ("return *x, x", "program line 1: a starred return value is not allowed"),
    ("return x.mean(-1, dtype=torch.float32)", "program line 1: keyword 'dtype' is not allowed for mean"),
    ("return F.layer_norm(x, (64,), eps=None)", "program line 1: None is not allowed here"),
    ("return x +", "program line 1: syntax error"),
    ("return", "program line 1: return without a value"),
    ("return torch", "program line 1: name 'torch' is allowed only in torch.… calls and dtypes"),
    ("return 10 ** 10 ** 10 * x", "program line 1: number too large"),
    ("return x * (1 / 0)", "program line 1: division by zero"),
]


@pytest.mark.parametrize("source,message", REJECTED, ids=[m for _, m in REJECTED])
def test_rejected_constructs_give_one_line_naming_them(source, message):
    assert error_of(source, case=CASE).startswith(message)


def test_program_error_is_a_value_error():
    assert issubclass(ProgramError, ValueError)


@pytest.mark.parametrize("source", [
    "return __import__('os').system('touch {p}')",
    "h = open('{p}', 'w')\nreturn x",
    "return x.__class__.__init__.__globals__['os'].system('touch {p}')",
    "import os\nos.system('touch {p}')\nreturn x",
    "return eval(\"__import__('os').system('touch {p}')\")",
    "return exec(\"open('{p}', 'w')\")",
    "return torch.save(x, '{p}')",
    "return x.numpy().tofile('{p}')",
])
def test_parse_never_executes_anything(source, tmp_path):
    target = tmp_path / "pwned"
    with pytest.raises(ProgramError):
        parse(source.format(p=target), case=CASE)
    assert not target.exists()


def test_qwen_program_ir():
    p = parse(QWEN)
    assert p.source == QWEN.strip("\n")
    assert p.reads == ("x", "w", "eps")
    assert p.params == ("w",)
    h, v, ret = p.statements
    assert h.name == "h" and h.line == 1 and h.value == Cast(Name("x"), "to", DType("float32"))
    assert v.value == Reduce("mean", BinOp("pow", Name("h"), Number(2)), (-1,), True, None)
    assert isinstance(ret, Return) and ret.line == 3
    inner = BinOp("mul", Name("h"), Unary("rsqrt", BinOp("add", Name("v"), Name("eps"))))
    assert ret.value == BinOp("mul", Name("w"), Cast(inner, "to", DTypeOf("x")))


def test_source_is_normalised():
    p = parse("\n\n    h = x.float()   \n    return h  \n\n")
    assert p.source == "h = x.float()\nreturn h"


@pytest.mark.parametrize("a,b", [
    ("return x.mean(-1, keepdim=True)", "return x.mean(dim=-1, keepdim=True)"),
    ("return x.mean(-1, True)", "return torch.mean(x, [-1], keepdim=True)"),
    ("return x.sum((0, 1))", "return torch.sum(x, dim=[0, 1])"),
    ("return x.var(-1, keepdim=True, correction=0)", "return torch.var(x, -1, correction=0, keepdim=True)"),
    ("return x.pow(2)", "return torch.pow(x, 2)"),
    ("return x ** 2", "return x.pow(2)"),
    ("return x.rsqrt()", "return torch.rsqrt(x)"),
    ("return -(-x)", "return -(-(+x))"),
    ("return F.layer_norm(x, (64,), w, b, eps)",
     "return torch.nn.functional.layer_norm(x, normalized_shape=[64], weight=w, bias=b, eps=eps)"),
    ("return F.rms_norm(x, (x.shape[-1],), None, None)", "return F.rms_norm(x, [x.shape[-1]])"),
])
def test_equivalent_spellings_give_the_same_ir(a, b):
    assert parse(a).statements == parse(b).statements


def test_norm_arguments_are_bound():
    (ret,) = parse("return F.group_norm(x, 2, w, eps=eps)").statements
    assert ret.value == Norm("group_norm", Name("x"), None, Number(2), Name("w"), None, Name("eps"))
    (ret,) = parse("return F.layer_norm(x, (x.shape[-2], 64))").statements
    assert ret.value.normalized_shape == (ShapeOf("x", -2), Number(64))


def test_extra_inputs_are_readable_when_the_case_has_them():
    case = ProgramCase("float32", (4, 64), extra_inputs=("y",))
    p = parse("return (x + y) * w", case=case)
    assert p.reads == ("x", "y", "w") and p.extra_inputs == ("y",)
    assert "no extra input 'r'" in error_of("return x + r", case=case)


def test_reassignment_and_numbers():
    p = parse("n = x.shape[-1]\nh = x * (1.0 / n)\nh = h - 2 * eps\nreturn h")
    assert [s.name for s in p.statements[:-1]] == ["n", "h", "h"]


CHECKED = [
    ("return x.mean(2)", "program line 1: dim 2 is out of range for a tensor of rank 2 in mean"),
    ("h = x.float()\nreturn h.sum([-3])", "program line 2: dim -3 is out of range"),
    ("return x.mean([1, -1])", "program line 1: dim [1, -1] repeats a dim"),
    ("return x + x.mean(1)", "program line 1: shapes [4, 64] and [4] do not broadcast"),
    ("return x.var(0, correction=4)", "program line 1: var over 4 element(s) with correction=4"),
    ("return F.layer_norm(x, (32,))", "program line 1: layer_norm: normalized_shape [32] does not match"),
    ("return F.group_norm(x, 3)", "program line 1: group_norm: num_groups 3 does not divide the 64 channels"),
    ("return F.layer_norm(x, (64,), w.bfloat16())", "program line 1: layer_norm: float16 input with bfloat16"),
    ("h = x.float()\nreturn F.layer_norm(h, (64,), w)", "program line 2: layer_norm: float32 input with float16"),
    ("return torch.rsqrt(eps)", "program line 1: rsqrt needs a tensor, got a number"),
    ("return x.shape[2] * x", "program line 1: x.shape[2] is out of range for rank 2"),
    ("n = x.shape[0]\nreturn n * 2.0", "program line 2: the return value is a number, not a tensor"),
    ("return x * s.mean(0, keepdim=True).float() + b.sum()", None),
]


@pytest.mark.parametrize("source,message", CHECKED, ids=[s for s, _ in CHECKED])
def test_static_check_against_the_case(source, message):
    case = ProgramCase("float16", (4, 64), eps=1e-6)
    if message is None:
        parse(source, case=case)
    else:
        assert error_of(source, case=case).startswith(message)


def test_too_long_or_too_deep_is_an_error():
    assert "longer than" in error_of("return x" + " + x" * 10_000)
    assert error_of("return " + "(" * 500 + "x" + ")" * 500).startswith("program")


def test_deep_expressions_are_refused_by_the_parser():
    assert "nested deeper than" in error_of("return " + " + ".join(["x"] * 300))
    parse("return " + " + ".join(["x"] * 50))


def test_a_return_of_several_values_is_a_program_of_several_outputs_named_by_what_it_returns():
    from harness.program.ir import Outputs
    from harness.program.render import render_program

    case = ProgramCase("bfloat16", (4, 64), extra_inputs=("r",))
    source = ("h = x.float() + r.float()\nnormed = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)"
              "\nreturn normed, h.to(x.dtype), r")
    program = parse(source, case=case)
    assert isinstance(program.statements[-1].value, Outputs) and len(program.statements[-1].values) == 3
    assert program.output_names == ("normed", "1", "r")  # a returned name is its own, anything else its position
    assert parse("return x, x", case=case).output_names == ("0", "1")  # a name returned twice: positions
    assert [t.dtype for t in check(program, case)] == ["bfloat16", "bfloat16", "bfloat16"]
    text = render_program(program.statements)
    assert text.splitlines()[-1] == "return normed, h.to(x.dtype), r"
    assert parse(text, case=case).statements == program.statements  # rendered, it parses back to itself
    with pytest.raises(ProgramError, match="the return value is a number"):
        parse("return x, 1.0", case=case)
    with pytest.raises(ProgramError, match="more than 8 outputs"):
        parse("return " + ", ".join(["x"] * 9), case=case)
