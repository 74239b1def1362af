"""Sharding: a deterministic, balanced partition that keeps a structure's cases together."""
import random

from helpers import small_layer_norm as ln

from harness.engine.plan import shard
from harness.spec import CaseSpec


def test_shard_is_a_deterministic_balanced_partition_keeping_structures_together():
    specs = [CaseSpec.from_dict(ln(shape=[2, 8 * (1 + i % 7)], seed=i // 7)) for i in range(35)]
    specs += [CaseSpec.from_dict(ln(dtype="float16", shape=[4, 4], seed=0, input={"kind": "normal", "std": 1 + i}))
              for i in range(12)]  # one structure bigger than a shard's share
    for n in (1, 2, 3, 5):
        parts = [shard(specs, k, n) for k in range(1, n + 1)]
        ids = [s.case_id for p in parts for s in p]
        assert sorted(ids) == sorted(s.case_id for s in specs) and len(set(ids)) == len(ids)
        cap = -(-len(specs) // n)
        assert max(map(len, parts)) - min(map(len, parts)) <= cap
        shuffled = specs[:]
        random.Random(n).shuffle(shuffled)
        assert [shard(shuffled, k, n) for k in range(1, n + 1)] == parts
        if n == 2:  # a structure with fewer cases than a share is not split
            small = {s.structure_key() for s in specs if s.dtype == "float32"}
            for key in small:
                assert sum(any(s.structure_key() == key for s in p) for p in parts) == 1


def test_a_group_has_one_structure_key_its_paths(monkeypatch):
    """Groups are keyed by Path.structure_key (the spec's own key unless the path overrides it), and carry
    that one key; a path that cannot be loaded is grouped by the face's default (its worker records why)."""
    from harness import paths
    from harness.engine.plan import group_tasks, plan

    monkeypatch.setenv(paths.ENV, "")
    paths.register("per-case", "tests.plugin_paths:PerCasePath")
    paths.register("not-loadable", "tests.no_such_module:Path")
    specs = [CaseSpec.from_dict(ln(shape=[2, 8], seed=s)) for s in range(3)]  # one structure, three cases
    groups = group_tasks(plan(specs, ["eager", "per-case", "not-loadable"]))
    by_path = {p: [g for g in groups if g.path == p] for p in ("eager", "per-case", "not-loadable")}
    assert [len(g.tasks) for g in by_path["eager"]] == [3] and [len(g.tasks) for g in by_path["not-loadable"]] == [3]
    assert by_path["eager"][0].structure == by_path["not-loadable"][0].structure == specs[0].structure_key()
    assert sorted(g.structure for g in by_path["per-case"]) == sorted(f"case-{s.case_id}" for s in specs)
