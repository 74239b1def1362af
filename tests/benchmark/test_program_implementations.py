"""Program renderings as paths through the real runner, and the program benchmark's grid."""
import os

import pytest

from cases import nearmiss
from harness import paths
from harness.benchmark import program_grid, program_implementations as PI
from harness.engine.execute import Executor
from harness.oracle.twins import program_twin
from harness.spec import CaseSpec


@pytest.fixture(autouse=True, scope="module")
def registered():
    """The renderings as paths for this module's tests only: other tests see the registry unchanged."""
    before = os.environ.get(paths.ENV)
    yield PI.register_all()
    if before is None:
        os.environ.pop(paths.ENV, None)
    else:
        os.environ[paths.ENV] = before


def near(name, dtype="float16", **more):
    return CaseSpec.from_dict(nearmiss.spec_of(nearmiss.get(name), dtype, **more))


@pytest.mark.parametrize("name", sorted(PI.CORRECT))
def test_correct_renderings_pass_through_the_real_runner(name):
    record = Executor().execute(near("qwen"), PI.PREFIX + name)
    assert record["verdict"] == "pass", record["message"]
    assert record["facts"] == {"implementation": PI.PREFIX + name, "correct": True}


@pytest.mark.parametrize("name, spec, verdict", [
    ("cast-back-dropped", near("qwen"), "dtype_mismatch"),
    ("stats-in-input-dtype", program_twin(CaseSpec.from_dict({
        "pattern": "layer_norm", "style": "manual", "dtype": "float16", "shape": [4, 256],
        "input": {"kind": "offset", "offset": 1000, "std": 1}})), "nonfinite"),
    ("scaled-swapped", near("scaled-not-squared"), "inaccurate"),
    ("wrong-dims", near("qwen"), "inaccurate"),
    ("weight-dropped", near("gemma-one-plus"), "inaccurate"),
    ("eps-moved", near("qwen", input={"kind": "normal", "mean": 0, "std": 1e-3}), "inaccurate"),
])
def test_wrong_renderings_are_flagged(name, spec, verdict):
    record = Executor().execute(spec, PI.PREFIX + name)
    assert record["verdict"] == verdict, record["message"]


def test_a_bug_class_that_does_not_apply_is_unsupported():
    ex = Executor()
    assert "no scaled tensor" in ex.execute(near("qwen"), PI.PREFIX + "scaled-swapped")["message"]
    assert ex.execute(near("qwen", "float32"), PI.PREFIX + "stats-in-input-dtype")["verdict"] == "unsupported"
    catalog = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [4, 64]})
    record = ex.execute(catalog, PI.PREFIX + "pairwise")
    assert record["verdict"] == "unsupported" and "program cases" in record["message"]


def test_a_rendering_reads_its_program_from_the_module_so_a_lifted_module_plugs_in():
    from harness.oracle.inputs import make_inputs
    from harness.oracle.modules import build_module

    spec = near("weight-right")
    module = build_module(spec, make_inputs(spec).params)
    source = PI.program_of(spec, module)
    assert source.program is module.program and source.case is module.case and source.names == ("x",)
    assert set(source.params) == set(module.program.params)
    with pytest.raises(PI.Unsupported):
        PI.program_of(spec, object())


def test_the_grid_holds_every_style_and_near_miss_once():
    specs = program_grid.cases()
    assert len({s.case_id for s in specs}) == len(specs)
    modules = program_grid.module_cases()
    assert all(s.program is not None for s in specs if s not in modules)
    assert all(s.is_module for s in modules)  # the zoo's sample: with the zoo extra, else none
    from harness.zoo.catalog import installed

    assert {s.dtype for s in modules} == ({"float32", "float16", "bfloat16"} if installed() else set())
    programs = {s.program for s in specs}
    for entry in nearmiss.CATALOG:
        assert CaseSpec.from_dict(nearmiss.spec_of(entry)).program in programs, entry.name
    styles = {(p, st) for p, sts in program_grid.STYLES.items() for st in sts}
    assert len(styles) == 8
    long_rows = [s for s in specs if s.shape == tuple(program_grid.LONG)]
    assert {s.dtype for s in long_rows} == {"float32", "float16", "bfloat16"}
    assert {s.weight_dtype for s in specs if s.dtype != "float32"} == {"float16", "bfloat16", "float32"}
    assert program_grid.module_cases(quick=True) == []
    quick = program_grid.cases(quick=True)
    assert set(s.case_id for s in quick) < set(s.case_id for s in specs)
    assert all(max(s.shape) <= 256 for s in quick)
