"""The program as a torch module: the same bits and the same exported graph as hand-written code."""
import numpy as np
import pytest
import torch
from upstream_norms import upstream

from harness.core.tensors import to_torch
from harness.program import ProgramCase, build_program_module, parse

QWEN = """
h = x.to(torch.float32)
v = h.pow(2).mean(-1, keepdim=True)
h = h * torch.rsqrt(v + eps)
return w * h.to(x.dtype)
"""


def qwen_class(case, w):
    """transformers' Qwen2RMSNorm, verbatim, holding `w`."""
    return upstream("qwen", case.shape[-1], case.eps, case.dtype, case.weight_dtype, w)


def targets(module, args):
    graph = torch.export.export(module, args).graph
    return [node.target for node in graph.nodes if node.op == "call_function"]


@pytest.mark.parametrize("dtype,wdtype", [("float16", "float16"), ("bfloat16", "bfloat16"),
                                          ("float32", "float32"), ("float16", "float32"), ("bfloat16", "float32")])
def test_qwen_program_equals_qwen_rmsnorm_bit_for_bit(dtype, wdtype, arrays):
    case = ProgramCase(dtype, (3, 5, 64), weight_dtype=wdtype, eps=1e-6)
    a = arrays(case, seed=1)
    ours = build_program_module(parse(QWEN, case=case), case, a)
    theirs = qwen_class(case, a["w"])
    x = to_torch(a["x"])
    with torch.no_grad():
        got, want = ours(x), theirs(x)
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_qwen_program_exports_the_hand_written_graph(arrays):
    case = ProgramCase("float16", (2, 64), eps=1e-6)
    a = arrays(case)
    x = to_torch(a["x"])
    ours = build_program_module(parse(QWEN, case=case), case, a)
    want = targets(qwen_class(case, a["w"]), (x,))
    assert targets(ours, (x,)) == want
    assert torch.ops.aten.rsqrt.default in want


def test_two_input_program_exports_and_runs(arrays):
    case = ProgramCase("float32", (4, 16), extra_inputs=("y",))
    a = arrays(case, seed=2)
    module = build_program_module(parse("return (x + y) * w", case=case), case, a)
    x, y = to_torch(a["x"]), to_torch(a["y"])
    exported = torch.export.export(module, (x, y))
    names = [n.name for n in exported.graph.nodes if n.op == "placeholder"]
    assert names[-2:] == ["x", "y"]
    assert [n.target for n in exported.graph.nodes if n.op == "call_function"] == [
        torch.ops.aten.add.Tensor, torch.ops.aten.mul.Tensor]
    with torch.no_grad():
        assert torch.equal(exported.module()(x, y), (x + y) * to_torch(a["w"]))


def test_extra_inputs_come_after_x_in_sorted_order(arrays):
    case = ProgramCase("float32", (2, 8), extra_inputs=("y", "r"))
    a = arrays(case, seed=3)
    module = build_program_module(parse("return x + 2.0 * r + 3.0 * y", case=case), case, a)
    x, r, y = (to_torch(a[n]) for n in ("x", "r", "y"))
    with torch.no_grad():
        assert torch.equal(module(x, r, y), x + 2.0 * r + 3.0 * y)


def test_parameters_are_the_ones_read_copied_exactly(arrays):
    case = ProgramCase("bfloat16", (2, 8), param_shapes={"s": (2, 8)})
    a = arrays(case, seed=4)
    module = build_program_module(parse("return x * s + b", case=case), case, a)
    assert sorted(n for n, _ in module.named_parameters()) == ["b", "s"]
    assert module.s.dtype == torch.bfloat16 and tuple(module.s.shape) == (2, 8)
    assert torch.equal(module.s.detach(), to_torch(a["s"])) and not module.training
    defaults = build_program_module(parse("return x * w + b", case=case), case, {})
    assert torch.equal(defaults.w.detach(), torch.ones(8, dtype=torch.bfloat16))
    assert torch.equal(defaults.b.detach(), torch.zeros(8, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="float32"):
        build_program_module(parse("return x * w", case=case), case, {"w": np.ones(8, np.float32)})


@pytest.mark.parametrize("source,expected", [
    ("return F.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), eps).half()",
     lambda x, w, b: torch.nn.functional.layer_norm(x.float(), (16,), w.float(), b.float(), 1e-5).half()),
    ("return F.group_norm(x, 2, w, b, eps)",
     lambda x, w, b: torch.nn.functional.group_norm(x, 2, w, b, 1e-5)),
    ("return x.float().var((0, 1), keepdim=True, correction=0).sqrt() + x.sum()",
     lambda x, w, b: x.float().var((0, 1), keepdim=True, correction=0).sqrt() + x.sum()),
    ("n = x.shape[-1]\nreturn x.square().sum(-1, True).reciprocal() * (0.5 / n) - x.abs() ** 0.5",
     lambda x, w, b: x.square().sum(-1, True).reciprocal() * (0.5 / 16) - x.abs() ** 0.5),
])
def test_other_calls_match_torch(source, expected, arrays):
    case = ProgramCase("float16", (4, 16))
    a = arrays(case, seed=5)
    module = build_program_module(parse(source, case=case), case, a)
    x, w, b = (to_torch(a[n]) for n in ("x", "w", "b"))
    with torch.no_grad():
        got, want = module(x), expected(x, w, b)
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_programs_cases_and_modules_pickle_and_copy(arrays):
    import copy
    import pickle

    case = ProgramCase("float16", (2, 64), eps=1e-6, param_shapes={"w": [64]})
    program = parse(QWEN, case=case)
    assert pickle.loads(pickle.dumps((program, case))) == (program, case)
    assert hash(case) == hash(ProgramCase("float16", [2, 64], eps=1e-6))
    a = arrays(case)
    module = build_program_module(program, case, a)
    twin = copy.deepcopy(module)
    x = to_torch(a["x"])
    with torch.no_grad():
        assert torch.equal(twin(x), module(x))


def test_a_shape_a_program_reads_stays_symbolic_when_exported_with_a_symbolic_dim(arrays):
    """`x.shape[-1]` (a normalized shape, a count) is the traced SymInt, not its example's size: the export keeps
    the dim symbolic and runs at another length as eager does."""
    source = "m = x.sum(-1, keepdim=True) * (1.0 / x.shape[-1])\nreturn F.layer_norm(x - m, (x.shape[-1],), None, None, eps)"
    case = ProgramCase("float32", (2, 67))
    module = build_program_module(parse(source, case=case), case, arrays(case))
    length = torch.export.Dim("length", min=1, max=4096)
    exported = torch.export.export(module, (to_torch(arrays(case)["x"]),), dynamic_shapes=({1: length},))
    longer = torch.randn(2, 2049)
    with torch.no_grad():
        want = torch.nn.functional.layer_norm(longer - longer.mean(-1, keepdim=True), (2049,), eps=case.eps)
        torch.testing.assert_close(exported.module()(longer), want)
