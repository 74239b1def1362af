"""Strategies over norm programs: valid by construction, shrinking toward the canonical norm."""
from __future__ import annotations

import importlib
import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings

from harness.spec import CaseSpec
from harness.engine.execute import Executor
from harness.search.programs import (
    AXES, BASES, INPUTS_PER_STRUCTURE, Skeleton, explains, program_batches, program_specs, skeleton_source, spec_of,
)
from harness.search.store import explained, signature

QUICK = settings(database=None, deadline=None, suppress_health_check=list(HealthCheck), max_examples=40)


def test_the_canonical_skeletons_are_the_catalog_norms():
    assert skeleton_source(Skeleton()) == ("h = x.to(torch.float32)\nv = h.pow(2).mean(-1, keepdim=True)\n"
                                  "n = h * torch.rsqrt(v + eps)\nreturn w * (n).to(x.dtype)")
    assert Skeleton().key() == "qwen" and Skeleton(base="t5").changes() == ()


@pytest.mark.parametrize("base", BASES)
def test_every_axis_value_renders_a_valid_program_for_every_base(base):
    for axis, values in AXES.items():
        for value in values:
            sk = Skeleton(base=base, **{axis: value})
            spec = spec_of(sk, dtype="float16", shape=[4, 32], extra_input={"kind": "normal"})
            assert spec.program is not None and CaseSpec.from_dict(spec.to_dict()) == spec, (base, axis, value)


@pytest.mark.parametrize("base", ("qwen", "layer"))
def test_every_drawn_neighbour_runs_on_its_shortest_row(base):
    """A drawn row is never shorter than its neighbour fits (a pool of kernel 2 on a row of 1 is refused; a
    rotate_half of a row of 1 slices an empty half), and there each runs on eager and its reference."""
    from cases import neighbours

    for nb in neighbours.fuzzable():
        spec = spec_of(Skeleton(base=base, neighbour=nb.name), dtype="float16", shape=[2, nb.min_row],
                       extra_input={"kind": "normal"})
        record = Executor().execute(spec, "eager")
        assert record["verdict"] == "pass", (nb.name, record["message"])
    assert neighbours.BY_NAME["pool-hardswish"].min_row == 2


def test_an_empty_slice_is_a_part_of_cat_like_any_other():
    """The reference takes what torch takes: a rotate_half on a row of 1 concatenates an empty slice (drawn
    before the neighbour had its shortest row; the reference's row numbering failed on the empty part)."""
    program = ("h = x.to(torch.float32)\nv = h.pow(2).mean(-1, keepdim=True)\nn = h * torch.rsqrt(v + eps)\n"
               "nrm = w * (n).to(x.dtype)\nnrm1 = nrm.narrow(-1, 0, 0)\nnrm2 = nrm.narrow(-1, 0, 1)\n"
               "return nrm * cs + torch.cat([-nrm2, nrm1], dim=-1) * sn")
    spec = CaseSpec.from_dict({"pattern": "rms_norm", "dtype": "float32", "shape": [2, 1], "program": program,
                               "param_shapes": {"w": [1], "cs": [2, 1], "sn": [2, 1]}})
    record = Executor().execute(spec, "eager")
    assert record["verdict"] == "pass", record["message"]


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
    bigger = spec_of(Skeleton(scaled="neg", root="div_sqrt"), dtype="float32", shape=[2, 8])
    drawn = {a.case_id: "qwen:scaled=neg", b.case_id: "qwen:scaled=neg", bigger.case_id: "qwen:scaled=neg,root=div_sqrt"}
    rec = lambda s: {"path": "p", "verdict": "inaccurate", "case_id": s.case_id, "case": s.to_dict()}  # noqa: E731
    assert signature(rec(a), drawn) == signature(rec(b), drawn) == (
        "p", "inaccurate", "rms_norm", "program", "qwen:scaled=neg")
    assert explained(signature(rec(bigger), drawn), {signature(rec(a), drawn)})
    assert signature(rec(a))[4].startswith("text-")  # a program nobody drew: named by its text


def test_shrinking_reaches_the_canonical_norm_with_the_one_change_that_matters():
    from hypothesis import find

    found = find(program_batches(max_row=16),
                 lambda batch: any("y.to(torch.float32) * torch.rsqrt" in s.program for s in batch.specs),
                 settings=settings(database=None, max_examples=2000, suppress_health_check=list(HealthCheck)))
    assert found.skeleton == "qwen:scaled=y" and len(found.specs) == 1  # the batch shrinks to its one example
    assert found.specs[0].shape == (2, 1) and found.specs[0].dtype == "float32"


@QUICK
@given(program_batches(max_row=64))
def test_a_batch_is_one_structure_with_several_inputs(batch):
    """What a path compiles is shared by the batch; only the inputs differ, and no case comes twice."""
    assert 1 <= len(batch.specs) <= INPUTS_PER_STRUCTURE
    assert len({s.structure_key() for s in batch.specs}) == 1
    assert len({s.case_id for s in batch.specs}) == len(batch.specs)
    assert batch.skeleton == Skeleton.from_key(batch.skeleton).key()


def test_the_same_seed_draws_the_same_batches():
    """Determinism: a draw depends on hypothesis' random alone (no state kept between draws)."""
    import random

    from hypothesis import Phase, find
    from hypothesis.errors import NoSuchExample

    def draws(seed):
        seen = []
        with pytest.raises(NoSuchExample):
            find(program_batches(), lambda b: seen.append((b.skeleton, [s.case_id for s in b.specs])) and False,
                 settings=settings(QUICK, max_examples=25, phases=[Phase.generate]), random=random.Random(seed))
        return seen

    first = draws("normdiff-fuzz:5:0")
    assert first == draws("normdiff-fuzz:5:0") and first != draws("normdiff-fuzz:6:0")
    assert sum(len(ids) for _, ids in first) > 2 * len(first)  # several examples per structure


def test_make_test_draws_the_same_programs_on_every_run(tmp_path):
    """tests/conftest.py's profile: a @given test without a seed of its own draws from its code alone (no
    example database, no fresh random, not the literals of whichever of the project's modules its xdist worker
    has imported so far), so one commit runs the same examples every time; `make fuzz` explores."""
    from hypothesis import strategies as st

    assert settings.default.derandomize and settings.default.database is None

    def draws(strategy):
        seen = []

        @settings(QUICK, max_examples=40)
        @given(strategy)
        def draw(value):
            seen.append(value)

        draw()
        return seen

    # seeds as program_batches draws them, many per example: hypothesis picks a literal of an imported
    # module for about one draw in forty
    batches, seeds = program_batches(max_row=64), st.lists(st.integers(0, 2 ** 31 - 1), min_size=40, max_size=40)
    first = (draws(batches), draws(seeds))
    assert len({b.skeleton for b in first[0]}) > 10
    (tmp_path / "house_literals.py").write_text("".join(
        f"C{i} = {v!r}\n" for i, v in enumerate([1729, 4242, 12345, 31337, 54321, 98765, 271828, 8675309]
                                                 + list(range(101, 4001, 37)))))
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("house_literals")  # a project module imported since: its literals are new
        assert (draws(batches), draws(seeds)) == first
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("house_literals", None)


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
    examples = summary["search_examples"] + summary["shrink_examples"]
    assert summary["structures"] < examples  # batches: a compile serves several examples
