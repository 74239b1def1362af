"""The reducer's one-step candidates: folds, earlier returns, shrinks, simpler parameters and inputs, each a
valid spec smaller than its case, in a stable order."""
from harness.program.ir import Assign, BinOp, Name, Return
from harness.search.reduce_steps import candidates, count_ops, size, tidy
from harness.spec import CaseSpec

NEIGHBOURS = {
    "pattern": "layer_norm", "dtype": "float16", "shape": [4, 64], "params": {"kind": "normal"}, "seed": 3,
    "input": {"kind": "alternating", "amplitude": 0.25}, "inputs": {"r": {"kind": "normal"}},
    "program": "h = x + r\nn = F.layer_norm(h, (h.shape[-1],), w, b, eps)\no = n * s\nreturn o.to(torch.float16)",
}


def test_ops_count_tensor_computations_only():
    spec = CaseSpec.from_dict(NEIGHBOURS)
    assert count_ops(spec) == 4  # add, layer_norm, mul, cast: not h.shape[-1]
    scaled = CaseSpec.from_dict({**NEIGHBOURS, "program": "return x * (1.0 / x.shape[-1]) + r"})
    assert count_ops(scaled) == 2


def test_tidy_propagates_a_bare_name_and_drops_what_nothing_reads():
    statements = (Assign("a", Name("x"), 1), Assign("dead", BinOp("mul", Name("x"), Name("x")), 2),
                  Assign("c", BinOp("add", Name("a"), Name("a")), 3), Return(Name("c"), 4))
    assert tidy(statements) == (Return(BinOp("add", Name("x"), Name("x")), 4),)


def test_candidates_fold_each_op_into_an_operand_of_its_type_and_cut_the_tail():
    spec = CaseSpec.from_dict(NEIGHBOURS)
    made = {c.what: c.spec for c in candidates(spec)}
    cast = made["folded cast in `return o.to(torch.float16)` into o"]  # o is float16 already: a cast that changes nothing
    assert cast.program == "h = x + r\nn = F.layer_norm(h, (h.shape[-1],), w, b, eps)\nreturn n * s"
    residual = made["folded add in `h = x + r` into x"]  # the first operand kept; r no longer read, so no longer an input
    assert residual.program.startswith("n = F.layer_norm(x, (x.shape[-1],), w, b, eps)") and not residual.inputs
    norm = made["folded layer_norm in `n = F.layer_norm(h, (h.shape[-1],), w, b, eps)` into h"]
    assert norm.program == "h = x + r\no = h * s\nreturn o.to(torch.float16)"
    assert [n for n, _ in norm.param_shapes] == ["s"]  # w and b are read no more
    tail = made["returned h (dropped what follows `h = x + r`)"]
    assert tail.program == "return x + r" and count_ops(tail) == 1
    assert made["folded add in `h = x + r` into r"].program.startswith("n = F.layer_norm(r, (r.shape[-1],)")
    assert "folded mul in `o = n * s` into s" not in made  # s is [64], not o's [4, 64]


def test_shape_parameter_and_input_steps_keep_the_spec_consistent():
    spec = CaseSpec.from_dict(NEIGHBOURS)
    made = {c.what: c.spec for c in candidates(spec)}
    axis = made["shrank the norm axis from 64 to 32"]
    assert axis.shape == (4, 32) and dict(axis.param_shapes) == {"w": (32,), "b": (32,), "s": (32,)}
    assert made["shrank dim 0 from 4 to 1"].shape == (1, 64)
    assert made["parameters normal -> ones"].params_dict == {"kind": "ones"}
    assert made["input x: alternating -> constant"].input_dict == {"kind": "constant", "value": 1.0}
    assert made["input r: normal -> uniform"].inputs_dict["r"]["kind"] == "uniform"
    assert made["seed -> 0"].seed == 0
    assert "input x: alternating -> normal" not in made  # not simpler than an alternating input


def test_candidates_are_smaller_distinct_and_ordered_by_size():
    spec = CaseSpec.from_dict(NEIGHBOURS)
    made = candidates(spec)
    sizes = [size(c.spec) for c in made]
    assert all(s < size(spec) for s in sizes) and sizes == sorted(sizes)
    assert len({c.spec.case_id for c in made}) == len(made)
    assert [c.spec.to_json() for c in candidates(CaseSpec.from_dict(NEIGHBOURS))] == [c.spec.to_json() for c in made]


def test_a_step_that_breaks_the_program_is_no_candidate():
    viewed = CaseSpec.from_dict({"pattern": "rms_norm", "dtype": "float32", "shape": [2, 64],
                                 "program": "v = x.view(2, 8, 8)\nreturn v.view(2, 64) * w"})
    made = {c.what: c.spec for c in candidates(viewed)}
    assert not any(w.startswith("shrank") for w in made)  # a literal view of 2x64 fits no other shape
    folded = made["folded mul in `return v.view(2, 64) * w` into v.view(2, 64)"]
    assert folded.program == "v = x.view(2, 8, 8)\nreturn v.view(2, 64)"


def test_a_step_that_only_renders_the_program_again_is_no_candidate():
    lifted = CaseSpec.from_dict({"pattern": "rms_norm", "dtype": "bfloat16", "shape": [1, 2],
                                 "input": {"kind": "constant"}, "param_shapes": {"weight": [2]},
                                 "program": "a = torch.rsqrt(x)\nm = weight * a\nreturn m"})
    made = {c.what for c in candidates(lifted)}
    assert not any(w.startswith("returned m ") for w in made)  # it returns m already
    assert {w.split(" in ")[0] for w in made} == {"folded rsqrt", "folded mul"}  # returning a = folding the mul
