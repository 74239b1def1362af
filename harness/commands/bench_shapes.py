"""`make bench`'s shapes line: the shapes suite cold and warm, and its compiles per path against its executions.

The shapes suite (cases/shapes.py) runs every structure at many sizes from
one symbolic compile, so a path should compile once per structure whatever
the number of sizes. What a path really compiled is read from the records of
the cold run (an empty artifact cache):

* one compile per structure the path prepared (its records' structure key; a
  structure whose every record is `unsupported` was refused before any
  compile, docs/shapes.md);
* a path that specialises (guards, recompiles) says how many compiles served
  its sizes in the fact `compiles`: the largest a structure's records report
  counts instead of one;
* each static control (a failure new to the run, compiled again statically at
  its own size) is one compile more.
"""
from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass

from harness.core.verdicts import Verdict


@dataclass(frozen=True)
class Compiles:
    """A path's compiles in a run of the shapes suite, against its executions."""
    path: str
    executions: int
    structures: int  # the structures it compiled symbolically (one compile each, unless it specialised)
    specialised: int  # compiles beyond one per structure (the fact `compiles`)
    static_controls: int  # static compiles of failing sizes

    @property
    def compiles(self) -> int:
        return self.structures + self.specialised + self.static_controls

    def text(self) -> str:
        return (f"{self.path}={self.compiles}/{self.executions}"
                + (f" ({self.specialised} specialised)" if self.specialised else "")
                + (f" ({self.static_controls} static controls)" if self.static_controls else ""))


def compiles_per_path(records: list[dict]) -> list[Compiles]:
    """Each path's Compiles in `records` (a cold run's), in the order the paths first appear."""
    runs: dict[str, dict[str, int]] = defaultdict(dict)  # path -> structure -> compiles that served it
    executions: dict[str, int] = defaultdict(int)
    controls: dict[str, int] = defaultdict(int)
    for r in records:
        path = r["path"]
        executions[path] += 1
        controls[path] += bool(r.get("static_control"))
        if r["verdict"] == Verdict.UNSUPPORTED or r.get("structure_key") is None:
            continue
        served = (r.get("facts") or {}).get("compiles")
        served = served if isinstance(served, int) and served > 0 else 1
        key = r["structure_key"]
        runs[path][key] = max(runs[path].get(key, 1), served)
    return [Compiles(p, n, len(runs[p]), sum(runs[p].values()) - len(runs[p]), controls[p])
            for p, n in executions.items()]


def shapes_lines(names: list[str], out: str, jobs: int, log, cold_and_warm) -> list[str]:
    """The shapes suite cold and warm on `names` (`cold_and_warm`: commands.bench's), as make bench's lines."""
    from cases.suites import suite

    specs = suite("shapes")
    log(f"shapes: {len(specs)} cases ({len({s.structure_key() for s in specs})} structures) x {len(names)} paths")
    from harness.commands.bench_where import time_lines

    cold, warm, same, records = cold_and_warm(specs, names, os.path.join(out, "shapes"), jobs)
    per_path = compiles_per_path(records)
    return [f"shapes_cold_s: {cold:.1f}  shapes_warm_s: {warm:.1f}  shapes_warm_speedup: {cold / warm:.1f}  "
            f"shapes_identical: {'yes' if same else 'no'}",
            "shapes_compiles_per_executions: " + "  ".join(c.text() for c in per_path)] + time_lines("shapes", records)
