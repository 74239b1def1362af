"""The op table (harness/program/ops.py): every op parses, runs in torch, exports to its ATen names and
stays within its FP64 bound; the ops real norms use (silu and sigmoid gates, channels-first parameters,
views, permutes, cat, F.linear) and named inputs and parameters."""
import numpy as np
import pytest
import torch

from harness.core.dtypes import np_dtype
from harness.core.tensors import to_torch
from harness.program import ProgramCase, ProgramError, build_program_module, evaluate, ops, parse


def _run(source, case, arrays):
    program = parse(source, case=case)
    module = build_program_module(program, case, {k: arrays[k] for k in program.params})
    with torch.no_grad():
        out = module(*(to_torch(arrays[n]) for n in case.inputs))
    ev = evaluate(program, case, arrays)
    return out, ev, program, module


def _arrays(case, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for name in case.inputs:
        shape, dtype = case.input_type(name)
        out[name] = rng.standard_normal(shape).astype(np_dtype(dtype))
    for name in case.params:
        out[name] = rng.standard_normal(case.param_shapes[name]).astype(np_dtype(case.weight_dtype))
    return out


def _within_bound(out, ev):
    err = np.abs(out.float().numpy().astype(np.float64) - ev.out)
    assert np.all(err <= ev.bound), float((err / np.maximum(ev.bound, 1e-300)).max())


@pytest.mark.parametrize("name", ops.UNARY)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_every_elementwise_op_runs_within_its_bound_and_exports_to_its_aten_names(name, dtype):
    op = ops.get(name)
    call = f"F.{name}(h)" if not op.method else f"h.{name}()"
    source = f"h = x.abs() + 0.5\nreturn {call}"
    case = ProgramCase(dtype, (4, 32))
    out, ev, _, module = _run(source, case, _arrays(case))
    assert str(out.dtype) == f"torch.{dtype}" and ev.out_dtype == dtype
    _within_bound(out, ev)
    ep = torch.export.export(module, (to_torch(_arrays(case)["x"]),))
    targets = {str(n.target).split(".")[1] for n in ep.graph.nodes if n.op == "call_function"}
    assert targets & set(op.aten), (targets, op.aten)


CHANNELS_FIRST = """u = x.mean(1, keepdim=True)
s2 = (x - u).pow(2).mean(1, keepdim=True)
h = (x - u) / torch.sqrt(s2 + eps)
return weight[:, None, None] * h + bias[:, None, None]"""


def test_a_channels_first_layer_norm_with_none_indexed_parameters():
    case = ProgramCase("float32", (2, 8, 3, 5), param_shapes={"weight": (8,), "bias": (8,)}, eps=1e-6)
    arrays = _arrays(case)
    out, ev, program, _ = _run(CHANNELS_FIRST, case, arrays)
    assert program.params == ("bias", "weight")
    x = arrays["x"].astype(np.float64)
    u = x.mean(1, keepdims=True)
    ref = (x - u) / np.sqrt(((x - u) ** 2).mean(1, keepdims=True) + 1e-6)
    ref = arrays["weight"].astype(np.float64)[:, None, None] * ref + arrays["bias"].astype(np.float64)[:, None, None]
    np.testing.assert_allclose(ev.out, ref, rtol=1e-12, atol=1e-12)
    _within_bound(out, ev)
    # one row per (sample, h, w) position, each over the 8 channels
    assert ev.row_len == 8 and ev.rows.max() + 1 == 2 * 3 * 5
    assert len(set(ev.rows[0, :, 1, 2].tolist())) == 1 and ev.rows[0, 0, 1, 2] != ev.rows[0, 0, 1, 3]


def test_a_permuted_layer_norm_keeps_each_element_in_its_row():
    source = ("h = x.permute(0, 2, 3, 1)\nh = F.layer_norm(h, (8,), None, None, eps)\n"
              "return h.permute(0, 3, 1, 2).contiguous()")
    case = ProgramCase("float16", (2, 8, 3, 5))
    out, ev, _, _ = _run(source, case, _arrays(case))
    assert ev.row_len == 8 and ev.rows.max() + 1 == 30
    assert len(set(ev.rows[1, :, 2, 4].tolist())) == 1
    _within_bound(out, ev)


GATED = """h = x.to(torch.float32)
h = h * F.silu(gate.to(torch.float32))
v = h.pow(2).mean(-1, keepdim=True)
h = h * torch.rsqrt(v + eps)
return weight * h.to(x.dtype)"""


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_gated_rms_norm_reads_its_gate_as_a_named_input(dtype):
    case = ProgramCase(dtype, (2, 4, 64), extra_inputs=("gate",), param_shapes={"weight": (64,)}, eps=1e-6)
    out, ev, program, module = _run(GATED, case, _arrays(case))
    assert program.extra_inputs == ("gate",) and program.params == ("weight",)
    _within_bound(out, ev)
    assert ev.row_len == 64


def test_views_narrow_and_linear():
    source = ("g = x.view(2, 4, -1)\nm = g.mean(-1, keepdim=True)\nh = (g - m).reshape(x.shape[0], 16)\n"
              "e = F.linear(F.silu(c), lw, lb)\nscale = e.narrow(-1, 0, 16)\nshift = e.narrow(-1, 16, 16)\n"
              "return h * (1.0 + scale) + shift")
    case = ProgramCase("float32", (2, 16), extra_inputs=("c",), input_types={"c": ((2, 8), "float32")},
                       param_shapes={"lw": (32, 8), "lb": (32,)})
    arrays = _arrays(case)
    out, ev, _, _ = _run(source, case, arrays)
    _within_bound(out, ev)
    c = arrays["c"].astype(np.float64)
    e = (c / (1 + np.exp(-c))) @ arrays["lw"].astype(np.float64).T + arrays["lb"].astype(np.float64)
    g = arrays["x"].astype(np.float64).reshape(2, 4, 4)
    h = (g - g.mean(-1, keepdims=True)).reshape(2, 16)
    np.testing.assert_allclose(ev.out, h * (1 + e[:, :16]) + e[:, 16:], rtol=1e-12, atol=1e-12)


PER_HEAD = """h0 = F.layer_norm(x.narrow(1, 0, 1), (16,), w, None, eps)
h1 = F.layer_norm(x.narrow(1, 1, 1), (16,), s, None, eps).to(torch.float32)
return torch.cat([h0, h1], dim=1)"""


def test_cat_joins_per_head_norms_exactly_each_head_in_its_own_rows():
    # StableLM's per-head layer norm: split the heads, one norm each, cat them back; a float16 and a
    # float32 head promote to float32 (exact), and each element keeps its head's value, bound and row
    case = ProgramCase("float16", (2, 2, 3, 16), param_shapes={"w": (16,), "s": (16,)})
    arrays = _arrays(case)
    out, ev, _, module = _run(PER_HEAD, case, arrays)
    assert out.dtype == torch.float32 and ev.out_dtype == "float32" and ev.out.shape == (2, 2, 3, 16)
    _within_bound(out, ev)
    x = arrays["x"].astype(np.float64)
    z = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    want = np.concatenate([z[:, :1] * arrays["w"].astype(np.float64), z[:, 1:] * arrays["s"].astype(np.float64)], 1)
    np.testing.assert_allclose(ev.out, want, rtol=1e-12, atol=1e-12)
    head = ev.rows
    assert ev.row_len == 16 and head.max() + 1 == 2 * 2 * 3  # one row per (sample, head, position)
    assert not set(head[:, 0].ravel()) & set(head[:, 1].ravel())
    ep = torch.export.export(module, (to_torch(arrays["x"]),))
    assert "aten.cat.default" in {str(n.target) for n in ep.graph.nodes}


@pytest.mark.parametrize("source, message", [
    ("return torch.cat(x, 1)", "tensors must be a non-empty list or tuple"),
    ("return torch.cat([x, x.view(16, 4)], 0)", "cat: shapes [[4, 16], [16, 4]] differ outside dim 0"),
    ("return torch.cat([x, x.view(2, 2, 16)], 0)", "cat needs one rank"),
    ("return torch.cat([x, x], 2)", "dim 2 is out of range for a tensor of rank 2 in cat"),
    ("return torch.cat([x, x], dim=x.shape[0])", "dim must be an int literal"),
    ("return x.cumprod(-1)", "call of 'x.cumprod' is not allowed"),
    ("return x.view(3, -1)", "is invalid for 64 elements"),
    ("return x.permute(0, 0)", "is not a permutation"),
    ("return x[0]", "subscript is not allowed"),
    ("return x[:, ::2]", "subscript is not allowed"),
    ("return x.unsqueeze(5)", "out of range for unsqueeze"),
    ("return x.view(x.shape[0], 2.5)", "arguments must be ints"),
    ("return F.linear(x, x.view(16, 4))", "linear: weight [16, 4] does not match"),
])
def test_what_the_language_refuses_is_one_line_naming_it(source, message):
    with pytest.raises(ProgramError) as info:
        parse(source, case=ProgramCase("float32", (4, 16)))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_program_is_parsed_once_per_case():
    case = ProgramCase("float16", (2, 8))
    assert parse("return x * 2", case=case) is parse("return x * 2", case=case)


def test_the_matcher_reads_the_table():
    from harness.attribution.match import canonical

    assert canonical("aten.silu.default") == "silu" and canonical("aten._fused_rms_norm.default") == "rms_norm"
    assert canonical("aten.unsqueeze.default") is None and canonical("aten.narrow.default") is None
    assert canonical("aten.cat.default") is None and canonical("relax.concat") is None  # layout, not computed
    assert canonical("relax.power") == "pow" and canonical("aten.square.default") == "pow"
