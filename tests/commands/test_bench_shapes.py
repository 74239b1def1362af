"""make bench's shapes line: each path's compiles against its executions, read from a run's records."""
import pytest

from harness import paths
from harness.commands.bench_shapes import compiles_per_path

QWEN_ROWS = {"pattern": "rms_norm", "style": "qwen", "dtype": "float32", "shape": [4, 64], "dynamic": [0],
             "params": {"kind": "normal"}}


@pytest.fixture
def plugin_paths(monkeypatch):
    monkeypatch.setenv(paths.ENV, "")
    paths.register("size-hint", "tests.plugin_paths:SizeHintPath")  # symbolic; fails off its compile size
    paths.register("float16-storage", "tests.plugin_paths:Float16StoragePath")  # static shapes only


def test_a_structure_is_one_compile_per_path_plus_its_static_controls(plugin_paths):
    from harness.engine.execute import Executor

    executor = Executor()
    records = [executor.execute({**QWEN_ROWS, "shape": [n, 64]}, p).to_dict()
               for p in ("eager", "size-hint", "float16-storage") for n in (4, 5, 9)]
    counts = {c.path: c for c in compiles_per_path(records)}
    assert [(c.executions, c.structures, c.specialised, c.static_controls) for c in counts.values()] == [
        (3, 1, 0, 0), (3, 1, 0, 2), (3, 0, 0, 0)]  # the static-only path refused: no compile
    assert counts["size-hint"].text() == "size-hint=3/3 (2 static controls)" and counts["eager"].text() == "eager=1/3"


def test_a_path_that_specialises_counts_the_compiles_its_facts_name():
    record = {"path": "inductor", "verdict": "pass", "structure_key": "k", "facts": {"compiles": 2}}
    (c,) = compiles_per_path([record, {**record, "facts": {"compiles": 3}}, {**record, "structure_key": "j", "facts": {}}])
    assert (c.structures, c.specialised, c.compiles, c.executions) == (2, 2, 4, 3)
    assert c.text() == "inductor=4/3 (2 specialised)"
