"""A norm opened into its parts: the same evaluation as `evaluate`, and part bounds that a correct
float32 implementation meets and a float16 accumulation does not."""
import json

import numpy as np
import pytest
from helpers import seed

from harness.core.dtypes import np_dtype
from harness.spec import CaseSpec
from harness.oracle.inputs import make_inputs
from harness.program import ProgramCase, evaluate, parse
from harness.program.expand import evaluate_expanded, is_part
from harness.attribution.stages import case_arrays, case_program

PROGRAMS = {
    "layer_norm": "return F.layer_norm(x, (x.shape[-1],), w, b, eps)",
    "layer_norm_weight": "h = F.layer_norm(x, (x.shape[-1],), w, None, eps)\nreturn h * 2.0",
    "rms_norm": "return F.rms_norm(x, (x.shape[-1],), w, eps)",
    "group_norm": "return F.group_norm(x, 2, w, b, eps)",
    "qwen": "h = x.to(torch.float32)\nv = h.pow(2).mean(-1, keepdim=True)\nreturn w * (h * torch.rsqrt(v + eps)).to(x.dtype)",
}


def _case(name, dtype="float16"):
    if name == "group_norm":
        return ProgramCase(dtype, (2, 8, 4, 4), param_shapes={"w": (8,), "b": (8,)})
    return ProgramCase(dtype, (3, 64))


def _arrays(case, seed_=0):
    rng = np.random.default_rng(seed_)
    dt = np_dtype(case.dtype)
    return {"x": rng.standard_normal(case.shape).astype(dt),
            **{n: rng.standard_normal(case.param_shapes[n]).astype(dt) for n in ("w", "b", "s")}}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_expanded_is_evaluate_plus_parts(name, dtype):
    case = _case(name, dtype)
    arrays = _arrays(case)
    program = parse(PROGRAMS[name], case=case)
    plain, opened = evaluate(program, case, arrays), evaluate_expanded(program, case, arrays)
    assert np.array_equal(plain.out, opened.out) and np.array_equal(plain.bound, opened.bound)
    assert (plain.nonfinite_stage, plain.overflow_stage) == (opened.nonfinite_stage, opened.overflow_stage)
    own = [s for s in opened.stages if not is_part(s)]
    assert [(s.name, s.op, s.dtype) for s in own] == [(s.name, s.op, s.dtype) for s in plain.stages]
    parts = [s for s in opened.stages if is_part(s)]
    has_norm = "norm" in PROGRAMS[name]
    assert bool(parts) == has_norm
    assert all(s.dtype == "float32" and np.all(s.err > 0) for s in parts)
    if name in ("layer_norm", "group_norm"):
        kind = name
        assert [s.op for s in parts] == [f"{kind}.{p}" for p in
                                         ("mean", "centered", "variance", "var_eps", "std", "rstd", "normalize", "scale")]
    if name == "layer_norm_weight":  # no bias: the norm's own stage is the scale
        assert parts[-1].op == "layer_norm.normalize"


def _part(evaluation, op):
    return next(s for s in evaluation.stages if s.op == op)


def test_part_bounds_hold_for_float32_statistics_and_not_for_a_float16_accumulator():
    """The seed's input: a float32 two-pass variance is within its bound, TVM's float16 one is not."""
    spec = CaseSpec.from_dict(json.load(open(seed("tvm-20909.json"))))
    inputs = make_inputs(spec)
    program, info = case_program(spec)
    ev = evaluate_expanded(program, info, case_arrays(spec, inputs))
    x32 = inputs.x.astype(np.float32)
    mean32 = x32.mean(-1, keepdims=True, dtype=np.float32)
    var32 = ((x32 - mean32) ** 2).mean(-1, keepdims=True, dtype=np.float32)
    acc = np.float16(0)
    for v in ((inputs.x - np.float16(0)) ** 2).ravel():  # a float16 accumulator, sequential
        acc = np.float16(acc + v)
    var16 = np.float16(acc / np.float16(inputs.x.size))
    variance = _part(ev, "layer_norm.variance")
    assert np.all(np.abs(var32 - variance.value) <= variance.err)
    assert np.all(np.abs(np.float64(var16) - variance.value) > 100 * variance.err)
    rstd = _part(ev, "layer_norm.rstd")
    assert np.all(np.abs(1 / np.sqrt(var32 + np.float32(spec.eps)) - rstd.value) <= rstd.err)
