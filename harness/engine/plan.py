"""Planning: cases × paths as tasks, sharding, and groups that share one compiled artifact."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable

from harness import paths
from harness.spec import CaseSpec


@dataclass(frozen=True)
class Task:
    spec: CaseSpec
    path: str
    attribute: bool = True  # attribution for a failing output (fuzz: only for the finding it keeps)

    @property
    def key(self) -> tuple[str, str]:
        return (self.spec.case_id, self.path)


def shard(specs: list[CaseSpec], k: int, n: int) -> list[CaseSpec]:
    """Part k (1-based) of n, deterministic and balanced, keeping structures together.

    Specs sharing a structure key (same compiled artifact) stay in one part
    so each shard compiles a structure once; a structure with more than
    ceil(total/n) cases is cut into chunks of that size. Chunks go, largest
    first, to the part with the fewest cases; everything is ordered by
    case_id, so the parts depend only on the set of specs.
    """
    ordered = sorted({s.case_id: s for s in specs}.values(), key=lambda s: s.case_id)
    if not ordered:
        return []
    cap = -(-len(ordered) // n)
    by_structure: dict[str, list[CaseSpec]] = {}
    for s in ordered:
        by_structure.setdefault(s.structure_key(), []).append(s)
    chunks = [g[i:i + cap] for g in by_structure.values() for i in range(0, len(g), cap)]
    chunks.sort(key=lambda c: (-len(c), c[0].case_id))
    parts: list[list[CaseSpec]] = [[] for _ in range(n)]
    for c in chunks:
        min(parts, key=lambda p: len(p)).extend(c)  # min() takes the first of equals
    return sorted(parts[k - 1], key=lambda s: s.case_id)


def plan(specs: Iterable[CaseSpec], path_names: list[str]) -> list[Task]:
    """Every case × path once, in the given order."""
    tasks = {}
    for s in specs:
        for p in path_names:
            tasks.setdefault((s.case_id, p), Task(s, p))
    return list(tasks.values())


@dataclass
class Group:
    """Tasks sharing one prepared artifact, still to be run.

    `structure` is the one key of the group: its path's `structure_key` of
    its tasks' specs (structure_of). The scheduler's affinity also reads it
    (a worker next takes another path's group of the key it just ran, whose
    export it still holds): for every built-in path it is the spec's own key.
    """

    path: str
    structure: str
    tasks: deque
    cached: bool = False  # its artifact is in the disk cache: a restore, not a compile (the scheduler's guess)


def structure_of(task: Task) -> str:
    """The key of the artifact `task` needs: its path's structure key for its spec."""
    try:
        path = paths.get(task.path)
    except Exception:  # noqa: BLE001 - a path that does not load: its worker records that; grouped by the default key
        return paths.Path().structure_key(task.spec)
    return path.structure_key(task.spec)


def group_tasks(tasks: list[Task]) -> list[Group]:
    """Tasks grouped by (path, structure key), in first-seen order."""
    groups: dict[tuple[str, str], Group] = {}
    for t in tasks:
        skey = structure_of(t)
        group = groups.get((t.path, skey))
        if group is None:
            group = groups[(t.path, skey)] = Group(t.path, skey, deque())
        group.tasks.append(t)
    return list(groups.values())
