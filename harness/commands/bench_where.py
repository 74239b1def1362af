"""`make bench`'s where-the-time-goes lines: each path's compile seconds against its run seconds, and the
structures the nightly's suites share.

A cold nightly is almost all compile (docs/measurements.md); which path pays
it, and whether the rest (setting a case up, scoring, attribution) matters,
is read from a cold run's records, whose own seconds split as:

* compile: `prepare_seconds` of the executions that built or restored their
  path's artifact (the first of each structure in a worker; the others reuse
  it in memory and pay 0);
* run: `run_seconds`, the compiled artifact on the case's inputs;
* setup and scoring: the rest of `seconds`: the case's inputs, its FP64
  reference (a gradient case's lifted backward), eager's output, scoring;
* attribution: its own seconds, beside `seconds`.

A static control (a shapes failure new to the run, compiled again at its own
size) is in no record's seconds: it is counted, not timed.

Structures shared across suites: the artifact cache keys an artifact by its
path and structure key (harness.engine.cache.ArtifactCache.key), so a
structure two suites of `make nightly` share is compiled once per path for
both; the line counts, per suite, its structure keys that another suite also
has. `python -m harness.commands.bench_where RESULTS.jsonl …` prints the lines
of any run's results (a cold suite run, say).
"""
from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass

NIGHTLY_SUITES = ("nightly", "context", "shapes", "gradients", "zoo")  # what `make nightly` runs (Makefile NIGHT_SUITES, the zoo)
GRADIENT_STRUCTURES = 6  # gradients-suite structures make bench runs cold and warm, evenly spaced by structure key


@dataclass(frozen=True)
class PathTime:
    """A path's share of a run: its executions, artifacts built and restored, and their seconds."""
    path: str
    executions: int
    builds: int  # artifacts compiled (or refused while compiling), the records that paid a prepare
    restores: int  # artifacts restored from the disk cache
    compile_s: float
    run_s: float
    setup_s: float  # inputs, reference, eager's output and scoring: the record's seconds but compile and run
    attribution_s: float
    static_controls: int

    def text(self) -> str:
        return (f"{self.path}: compile {self.compile_s:.1f} s ({self.builds} built, {self.restores} restored)  "
                f"run {self.run_s:.1f} s  setup+scoring {self.setup_s:.1f} s  attribution {self.attribution_s:.1f} s"
                f"  executions {self.executions}"
                + (f"  static controls {self.static_controls}" if self.static_controls else ""))


def time_per_path(records: list[dict]) -> list[PathTime]:
    """Each path's PathTime in `records`, the most compile seconds first."""
    from harness.engine.cache import Origin

    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in records:
        s = sums[r["path"]]
        s["executions"] += 1
        prepare = r.get("prepare_seconds") or 0.0
        run = r.get("run_seconds") or 0.0
        if r.get("structure_key") is not None and not r.get("cache_hit"):  # it prepared, not reused in memory
            s["restores" if r.get("artifact_cache") == Origin.HIT else "builds"] += 1
        s["compile"] += prepare
        s["run"] += run
        s["setup"] += max(0.0, (r.get("seconds") or 0.0) - prepare - run)
        s["attribution"] += r.get("attribution_seconds") or 0.0
        s["controls"] += bool(r.get("static_control"))
    out = [PathTime(p, int(s["executions"]), int(s["builds"]), int(s["restores"]), s["compile"], s["run"],
                    s["setup"], s["attribution"], int(s["controls"])) for p, s in sums.items()]
    return sorted(out, key=lambda t: -t.compile_s)


def time_lines(label: str, records: list[dict]) -> list[str]:
    """`label`'s totals, then one line per path (time_per_path)."""
    each = time_per_path(records)
    total = {k: sum(getattr(t, k) for t in each) for k in ("compile_s", "run_s", "setup_s", "attribution_s")}
    whole = sum(total.values()) or 1.0
    head = (f"{label}_seconds: compile {total['compile_s']:.1f} ({total['compile_s'] / whole:.0%})  "
            f"run {total['run_s']:.1f} ({total['run_s'] / whole:.0%})  setup+scoring {total['setup_s']:.1f} "
            f"({total['setup_s'] / whole:.0%})  attribution {total['attribution_s']:.1f}  "
            f"builds {sum(t.builds for t in each)}  static_controls {sum(t.static_controls for t in each)}")
    return [head] + [f"  {label} {t.text()}" for t in each]


@dataclass(frozen=True)
class Shared:
    """A suite's structure keys, and how many of them another suite has too."""
    suite: str
    structures: int
    shared: int

    def text(self) -> str:
        return f"{self.suite}={self.shared}/{self.structures}"


def shared_structures(keys: dict[str, set[str]]) -> list[Shared]:
    """For each suite of `keys` (suite -> its structure keys), the keys any other suite has too."""
    return [Shared(name, len(mine), len(mine & set().union(*(k for n, k in keys.items() if n != name))))
            for name, mine in keys.items()]


def suite_keys(names=NIGHTLY_SUITES) -> dict[str, set[str]]:
    """The structure keys of each suite of `names` that this installation builds (the zoo only with its extra)."""
    from cases.suites import suite
    from harness.zoo.catalog import installed

    return {n: {s.structure_key() for s in suite(n)} for n in names if n != "zoo" or installed()}


def shared_line(keys: dict[str, set[str]] | None = None) -> str:
    """make bench's line: per suite, its structures another suite shares, over its structures."""
    keys = suite_keys() if keys is None else keys
    return "structures_shared_across_suites: " + "  ".join(s.text() for s in shared_structures(keys))


def gradients_sample() -> list:
    """GRADIENT_STRUCTURES structures of the gradients suite, with all their cases."""
    from cases.suites import suite

    by_structure: dict[str, list] = {}
    for spec in suite("gradients"):
        by_structure.setdefault(spec.structure_key(), []).append(spec)
    keys = sorted(by_structure)
    step = max(1, len(keys) // GRADIENT_STRUCTURES)
    return [s for k in keys[::step][:GRADIENT_STRUCTURES] for s in by_structure[k]]


def gradients_lines(names: list[str], out: str, jobs: int, log, cold_and_warm) -> list[str]:
    """The gradients sample cold and warm on `names` (`cold_and_warm`: commands.bench's), as make bench's lines:
    the two times, then where the cold run's seconds went."""
    import os

    specs = gradients_sample()
    log(f"gradients: {len(specs)} cases ({len({s.structure_key() for s in specs})} structures) x {len(names)} paths")
    cold, warm, same, records = cold_and_warm(specs, names, os.path.join(out, "gradients"), jobs)
    return [f"gradients_cold_s: {cold:.1f}  gradients_warm_s: {warm:.1f}  gradients_warm_speedup: {cold / warm:.1f}  "
            f"gradients_identical: {'yes' if same else 'no'}"] + time_lines("gradients", records)


def main(argv=None) -> int:
    from harness.core.records import read_results

    argv = sys.argv[1:] if argv is None else argv
    if not argv or any(a.startswith("-") for a in argv):
        print("usage: python -m harness.commands.bench_where RESULTS.jsonl …", file=sys.stderr)
        return 2
    for name in argv:
        try:
            records = read_results(name)
        except (OSError, ValueError) as exc:
            print(f"bench_where: error: {name}: {exc}", file=sys.stderr)
            return 2
        print("\n".join(time_lines(name.removesuffix("/results.jsonl").rsplit("/", 1)[-1], records)))
    print(shared_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
