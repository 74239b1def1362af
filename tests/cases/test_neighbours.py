"""The neighbourhood generator (cases/neighbours.py) and the context suite built from it."""
import itertools
import json

import pytest

from cases import neighbours as nbs
from cases.suites import suite, suite_notes
from harness.program import ops
from harness.program.typecheck import check
from harness.spec.program_keys import program_case
from harness.spec import CaseSpec, SpecError
from harness.search.programs import AXES, Skeleton, spec_of as skeleton_spec

DTYPES = ("float16", "bfloat16", "float32")


def out_type(spec: CaseSpec):
    """The program's output type, by the static type check."""
    return check(spec.parsed_program, program_case(spec))


def test_every_neighbour_around_every_catalog_norm_parses_and_typechecks():
    """Every active template around every catalog norm with a program, in three dtypes: a valid program case
    (parsed and type-checked by CaseSpec.from_dict; nothing runs)."""
    count = 0
    for nb in nbs.active():
        for norm in nbs.catalog_norms():
            if nbs.applies(nb, norm):
                for dtype in DTYPES:
                    spec = CaseSpec.from_dict(nbs.spec_of(nb, norm, dtype))
                    assert spec.program and spec.pattern == norm.pattern
                    count += 1
    assert count > 1000


def test_the_generator_is_deterministic_and_names_are_unique():
    assert len(nbs.BY_NAME) == len(nbs.TABLE)
    a = [s.to_json() for s in suite("context")]
    assert a == [s.to_json() for s in suite("context")] and len(set(a)) == len(a)
    nb, norm = nbs.BY_NAME["residual-float32"], nbs.Norm("rms_norm", "qwen", "to")
    assert nbs.program(nb, norm, "bfloat16") == (
        "pre = x.to(torch.float32) + r.to(torch.float32)\nh = pre.to(torch.float32)\n"
        "v = h.pow(2).mean(-1, keepdim=True)\nh = h * torch.rsqrt(v + eps)\nreturn w * h.to(x.dtype)")


def test_the_three_residual_roundings_keep_the_models_dtype_where_it_names_it():
    """vLLM's native path normalises the float32 sum and casts back to the model's dtype; its fused kernel
    rounds the sum to the dtype first; a plain block adds in the dtype."""
    llama = nbs.Norm("rms_norm", "llama", "type_as")
    src = {n: nbs.program(nbs.BY_NAME[n], llama, "float16")
           for n in ("residual-dtype", "residual-float32", "residual-rounded")}
    assert src["residual-dtype"].startswith("pre = x + r\nh = pre.float()")
    assert "out = h.type_as(x)" in src["residual-float32"]
    assert src["residual-rounded"].startswith("pre = (x.to(torch.float32) + r.to(torch.float32)).to(x.dtype)")
    for n in ("residual-float32",):
        assert not nbs.applies(nbs.BY_NAME[n], nbs.Norm("layer_norm", "module"))  # only around an upcasting norm
    spec = CaseSpec.from_dict(nbs.spec_of(nbs.BY_NAME["residual-float32"], llama, "float16"))
    assert out_type(spec).dtype == "float16"


def test_the_suite_covers_every_active_neighbour_in_three_dtypes_and_lists_the_pending_ones(cli_here):
    specs = suite("context")
    names = {nb.name for nb, _ in nbs.suite_pairs(nbs.active())}
    assert names == {nb.name for nb in nbs.active()}
    assert {s.dtype for s in specs} == set(DTYPES)
    assert {s.pattern for s in specs} == {"layer_norm", "rms_norm", "group_norm"}
    assert len({s.structure_key() for s in specs}) <= 120  # sized to run warm on every path in well under a minute
    pending = {nb.name for nb, _ in nbs.pending()}
    assert pending == {nb.name for nb in nbs.TABLE if any(o not in ops.BY_NAME for o in nb.ops)}
    assert pending.isdisjoint(names)
    proc = cli_here("cases", "--suite", "context")
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == len(specs)
    for nb, why in nbs.pending():
        assert f"context: pending: {nb.name} (needs op" in proc.stderr and why in proc.stderr
    assert "not wrapped: batch_norm" in proc.stderr and suite_notes("smoke") == []


def test_a_scale_that_does_not_fit_is_a_clean_refusal_and_one_that_broadcasts_is_a_case(cli_here, tmp_path):
    nb, norm = nbs.BY_NAME["scale-dtype"], nbs.Norm("rms_norm", "qwen", "to")
    raw = nbs.spec_of(nb, norm, "float16")
    with pytest.raises(SpecError, match="spec key 'program'.*broadcast") as exc:
        CaseSpec.from_dict({**raw, "param_shapes": {"s": [32]}})
    assert "\n" not in str(exc.value)
    (tmp_path / "misfit.json").write_text(json.dumps({**raw, "param_shapes": {"s": [32]}}))
    proc = cli_here("run", "--case", "misfit.json", "--paths", "eager", "--out", "out")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "broadcast" in proc.stderr
    rows = CaseSpec.from_dict(nbs.spec_of(nbs.BY_NAME["scale-rows"], norm, "float16"))
    assert out_type(rows).shape == nbs.SHAPE
    expand = CaseSpec.from_dict(nbs.spec_of(nbs.BY_NAME["scale-expand"], norm, "float16"))
    assert expand.shape == (16, 1) and out_type(expand).shape == (16, 64)


def test_fuzz_programs_draws_every_fuzzable_neighbour_around_every_base_and_cast():
    assert AXES["neighbour"] == ("none",) + tuple(n.name for n in nbs.fuzzable())
    for base in ("qwen", "llama", "gemma", "t5", "layer"):
        for name in AXES["neighbour"][1:]:
            for dtype in ("float16", "float32"):  # bfloat16 types as float16 does
                # a mutated upcast or cast back changes the dtype the neighbour sees
                for up, back in itertools.product(AXES["upcast"], AXES["cast_back"]):
                    sk = Skeleton(base=base, neighbour=name, weight_shape="broadcast", after="mul_s", upcast=up,
                                  cast_back=back)
                    spec = skeleton_spec(sk, dtype=dtype, shape=[3, 9], params="normal", weight_dtype="float32")
                    assert CaseSpec.from_dict(spec.to_dict()) == spec, (base, name, dtype)
    assert Skeleton.from_key("qwen:neighbour=rotary-after").neighbour == "rotary-after"


def test_a_context_case_runs_on_eager_and_a_compiler_path(execute_cached):
    """End to end: the Llama norm then a float16 Linear (the issue's "fails later"): eager passes; RecomposeRmsNorm
    rebuilds the norm in float32 and the Linear refuses its operands, which the context triage ties to #24428."""
    from cases.triage import triage

    spec = CaseSpec.from_dict(nbs.spec_of(nbs.BY_NAME["linear-after"], nbs.Norm("rms_norm", "llama", "type_as"),
                                          "float16"))
    eager = execute_cached(spec, "eager")
    assert eager["verdict"] == "pass" and eager["max_err_over_tol"] < 1.0 and eager["out_dtype"] == "float16"
    rebuilt = execute_cached(spec, "executorch-recompose").to_dict()
    assert rebuilt["verdict"] == "error" and "must have the same dtype" in rebuilt["message"], rebuilt["message"]
    assert triage(rebuilt)[0] == "pytorch/executorch#24428"
