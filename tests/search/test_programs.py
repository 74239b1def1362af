"""Strategies over norm programs: valid by construction, shrinking toward the canonical norm."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from harness.spec import CaseSpec
from harness.engine.execute import Executor
from harness.search.programs import AXES, BASES, Skeleton, explains, program_specs, render, skeleton_of, spec_of
from harness.search.store import explained, signature

QUICK = settings(database=None, deadline=None, suppress_health_check=list(HealthCheck), max_examples=40)


def test_the_canonical_skeletons_are_the_catalog_norms():
    assert render(Skeleton()) == ("h = x.to(torch.float32)\nv = h.pow(2).mean(-1, keepdim=True)\n"
                                  "n = h * torch.rsqrt(v + eps)\nreturn w * (n).to(x.dtype)")
    assert Skeleton().key() == "qwen" and Skeleton(base="t5").changes() == ()


@pytest.mark.parametrize("base", BASES)
def test_every_axis_value_renders_a_valid_program_for_every_base(base):
    for axis, values in AXES.items():
        for value in values:
            sk = Skeleton(base=base, **{axis: value})
            spec = spec_of(sk, dtype="float16", shape=[4, 32], extra_input={"kind": "normal"})
            assert spec.program is not None and skeleton_of(spec.program) == sk, (base, axis, value)


@QUICK
@given(program_specs(max_row=64))
def test_drawn_programs_run_on_eager(spec):
    """Valid by construction: torch takes every drawn program (no error on eager)."""
    record = Executor().execute(spec, "eager")
    assert record["verdict"] != "error", (spec.program, record["message"])


def test_a_skeleton_key_round_trips_and_a_smaller_finding_explains_a_larger_one():
    sk = Skeleton(base="llama", scaled="y", after="mul_s")
    assert Skeleton.from_key(sk.key()) == sk and sk.describe() == "llama: scaled=y, after=mul_s"
    assert explains("llama:scaled=y", sk.key()) and not explains("qwen:scaled=y", sk.key())
    assert not explains("llama:scaled=y,eps=none", sk.key())


def test_a_programs_signature_is_its_skeleton_not_its_dtype():
    a = spec_of(Skeleton(scaled="neg"), dtype="float32", shape=[2, 8])
    b = spec_of(Skeleton(scaled="neg"), dtype="float16", shape=[4, 16])
    rec = lambda s: {"path": "p", "verdict": "inaccurate", "case": s.to_dict()}  # noqa: E731
    assert signature(rec(a)) == signature(rec(b)) == ("p", "inaccurate", "rms_norm", "program", "qwen:scaled=neg")
    bigger = spec_of(Skeleton(scaled="neg", root="div_sqrt"), dtype="float32", shape=[2, 8])
    assert explained(signature(rec(bigger)), {signature(rec(a))})


def test_shrinking_reaches_the_canonical_norm_with_the_one_change_that_matters():
    from hypothesis import find

    found = find(program_specs(max_row=16), lambda s: "y.to(torch.float32) * torch.rsqrt" in s.program,
                 settings=settings(database=None, max_examples=2000, suppress_health_check=list(HealthCheck)))
    assert skeleton_of(found.program).key() == "qwen:scaled=y"
    assert found.shape == (2, 1) and found.dtype == "float32"


@pytest.mark.slow
def test_fuzz_programs_finds_a_wrong_rewrite_and_saves_a_program_spec(cli, tmp_path):
    out = tmp_path / "out"
    proc = cli("fuzz", "--programs", "--paths", "executorch-recompose", "--max-examples", "60", "--seed", "7",
               "--dtypes", "float32", "--styles", "qwen", "--searches", "1", "--out", str(out),
               "--database", "none", "--quiet")
    assert proc.returncode == 1, proc.stderr[-3000:]
    summary = json.loads((out / "fuzz.json").read_text())
    found = [f for f in summary["findings"] if f["confirmed"]]
    assert found, [f["signature"] for f in summary["findings"]]
    for f in found:  # each saved finding is a plain program spec: eager passes, the rewrite fails
        spec = CaseSpec.from_dict(json.loads(open(f["file"]).read()))
        assert spec.program is not None and f["eager_verdict"] == "pass" and f["verdict"] != "pass"
        assert f["style"] == "program" and f["dtype"].startswith("qwen")  # the skeleton is the signature
