"""The ops around a norm (the op table's call rows): each parses, type-checks, renders back, evaluates as torch
does in float64, and its bound holds for eager and for the witnesses in float32, float16 and bfloat16."""
import numpy as np
import pytest
import torch

from harness.core.dtypes import np_dtype
from harness.program import ops, witness_run
from harness.program.interpret import evaluate
from harness.program.ir import ProgramCase, ProgramError
from harness.program.parse import parse
from harness.program.render import render_program
from harness.program.torch_module import TorchWalker, array_to_torch, build_program_module

ROTARY = "d = x.shape[-1] // 2\nreturn x * y + torch.cat([-x[..., d:], x[..., :d]], -1) * r"
# op: (program, shape of x); y and r have x's shape unless the case below says otherwise
PROGRAMS = {
    "matmul": ("return x @ y.transpose(-1, -2) + torch.matmul(x.narrow(0, 0, 1).squeeze(0), "
               "y.narrow(1, 0, 1).reshape(2, 64, 1).narrow(0, 1, 1).reshape(64))", (2, 4, 64)),
    "softmax": ("return F.softmax(x * 4.0, dim=-1) + torch.softmax(x, 0) + x.softmax(1)", (4, 64)),
    "cumsum": ("return x.cumsum(-1) + torch.cumsum(x, dim=0)", (4, 64)),
    "gelu": ("return F.gelu(x * 3.0) + F.gelu(x * 3.0, approximate='tanh')", (4, 64)),
    "elu": ("return F.elu(x * 3.0) + F.elu(x, alpha=0.5)", (4, 64)),
    "hardswish": ("return F.hardswish(x * 4.0)", (4, 64)),
    "avg_pool1d": ("return F.avg_pool1d(x, 3, 2, 1) + F.avg_pool1d(x, 3, 2, 1, count_include_pad=False)", (2, 4, 16)),
    "avg_pool2d": ("return F.avg_pool2d(x, 2) + F.avg_pool2d(x, (2, 2), stride=2)", (2, 3, 8, 8)),
    "max_pool1d": ("return F.max_pool1d(x, kernel_size=3, stride=1, padding=1)", (2, 4, 16)),
    "max_pool2d": ("return F.max_pool2d(x, (3, 2), stride=1)", (2, 3, 8, 8)),
    "interpolate": ("return F.interpolate(x, scale_factor=2) + F.interpolate(x, size=(8, 8))", (2, 3, 4, 4)),
    "clamp": ("return x.clamp(min=-0.5, max=0.5) + torch.clamp(x, max=0.1)", (4, 64)),
    "ones_like": ("return x * torch.ones_like(x)", (4, 64)),
    "rotary": (ROTARY, (2, 4, 64)),
}


def _case(shape, dtype):
    return ProgramCase(dtype, shape, extra_inputs=("r", "y"))


def _arrays(shape, dtype, seed=0, offset=0.0):
    rng = np.random.default_rng(seed)
    return {n: (rng.standard_normal(shape) + offset).astype(np_dtype(dtype)) for n in ("x", "y", "r")}


def test_every_call_op_has_a_program_here():
    used = {op for source, _ in PROGRAMS.values() for op in ops.CALL
            if op.removesuffix("1d").removesuffix("2d") in source or (op == "matmul" and "@" in source)}
    assert used == set(ops.CALL)


@pytest.mark.parametrize("name", PROGRAMS)
def test_parse_render_and_the_fp64_reference_is_torch_in_float64(name):
    source, shape = PROGRAMS[name]
    case = _case(shape, "float32")
    program = parse(source, case=case)
    again = parse(render_program(program.statements), case=case)
    assert again.statements == program.statements
    arrays = _arrays(shape, "float32")
    ev = evaluate(program, case, arrays)
    env = {"eps": case.eps, **{n: torch.from_numpy(a.astype(np.float64)) for n, a in arrays.items()}}
    torch64 = TorchWalker(env).run(program).numpy()
    np.testing.assert_allclose(ev.out, torch64, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_the_bound_holds_for_eager_and_for_every_witness(name, dtype):
    source, shape = PROGRAMS[name]
    case = _case(shape, dtype)
    program = parse(source, case=case)
    module = build_program_module(program, case)
    for seed, offset in ((1, 0.0), (2, 3.0)):
        arrays = _arrays(shape, dtype, seed, offset)
        ev = evaluate(program, case, arrays)
        with torch.no_grad():
            eager = module(*(array_to_torch(arrays[n]) for n in ("x", "r", "y"))).float().numpy()
        assert np.all(np.abs(eager - ev.out) <= ev.bound), (name, dtype, offset)
        for witness, out in witness_run.outputs(program, case, arrays):
            assert np.all(np.abs(out.astype(np.float64) - ev.out) <= ev.bound), (name, dtype, witness)


@pytest.mark.parametrize("source, shape, words", [
    ("return F.softmax(x, dim=2)", (4, 64), "dim 2 is out of range for a tensor of rank 2 in softmax"),
    ("return F.softmax(x)", (4, 64), "missing argument 'dim' for F.softmax"),
    ("return x.cumsum(dim=x.shape[0])", (4, 64), "cumsum: dim must be an int literal"),
    ("return F.avg_pool2d(x, 5)", (2, 3, 4, 4), "kernel_size [5, 5] is larger than the padded input [4, 4]"),
    ("return F.max_pool2d(x, 2, padding=2)", (2, 3, 4, 4), "padding [2, 2] should be at most half"),
    ("return F.avg_pool1d(x, 2)", (2, 3, 4, 4), "1-d pool needs a tensor of rank 2 or 3, got rank 4"),
    ("return F.avg_pool2d(x, 2, ceil_mode=True)", (2, 3, 4, 4), "ceil_mode must be False"),
    ("return F.max_pool2d(x, 2, dilation=2)", (2, 3, 4, 4), "dilation must be 1"),
    ("return x @ x", (4, 64), "matmul: shapes [4, 64] and [4, 64] cannot be multiplied"),
    ("return x @ x.to(torch.float16).transpose(0, 1)", (4, 64), "matmul: operands must share a dtype"),
    ("return F.gelu(x, approximate='fast')", (4, 64), "approximate must be 'none' or 'tanh'"),
    ("return F.interpolate(x, size=4, scale_factor=2)", (2, 3, 4, 4), "give exactly one of size and scale_factor"),
    ("return F.interpolate(x, scale_factor=2, mode='bilinear')", (2, 3, 4, 4), "mode must be 'nearest'"),
    ("return F.interpolate(x, scale_factor=2)", (4, 64), "interpolate needs a tensor of rank 3, 4 or 5"),
    ("return x.clamp()", (4, 64), "clamp: give at least one of min and max"),
    ("return x // 2", (4, 64), "'//' is allowed between ints only"),
    ("return x[..., ::2]", (4, 64), "subscript is not allowed"),
    ("return x[..., :x]", (4, 64), "a slice bound: arguments must be ints"),
])
def test_a_misuse_is_one_line_naming_the_line(source, shape, words):
    with pytest.raises(ProgramError) as info:
        parse(source, case=_case(shape, "float32"))
    message = str(info.value)
    assert message.startswith("program line 1: ") and words in message and "\n" not in message


NEIGHBOURHOOD = {
    "pattern": "layer_norm", "dtype": "float16", "shape": [2, 3, 8, 16], "params": {"kind": "normal"},
    "param_shapes": {"p": [16, 16]},
    "program": "h = F.interpolate(F.avg_pool2d(x, 2), scale_factor=2) + F.max_pool2d(x, 3, stride=1, padding=1)\n"
               "h = F.layer_norm(h, (16,), w, b, eps)\n"
               "d = h.shape[-1] // 2\n"
               "h = h * 0.5 + torch.cat([-h[..., d:], h[..., :d]], -1) * 0.25\n"
               "a = F.softmax(h @ p, dim=-1)\n"
               "g = F.gelu(a) + F.gelu(h, approximate='tanh') + F.elu(h) + F.hardswish(h)\n"
               "return (g + g.cumsum(-1) * 0.1).clamp(min=-4.0) * torch.ones_like(g)",
}


@pytest.mark.parametrize("path", ["eager", "inductor"])
def test_a_program_of_every_call_op_passes_eager_and_a_compiler(path, execute_cached):
    record = execute_cached(NEIGHBOURHOOD, path)
    assert record.verdict == "pass", (record.verdict, record.message)
