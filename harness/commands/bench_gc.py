"""The collector in a worker (harness.engine.worker.WORKER_GC_THRESHOLDS) against Python's own thresholds, side
by side: `python -m harness.commands.bench_gc [--rounds R] [--paths P,…] [--structures N,N,N,N]`.

Why: a cold run is compile, and a compile's objects (FX graphs, decompositions, TVM's and ONNX's) kept the
collector busy (docs/measurements.md#the-collector-in-the-workers). Each side is a fresh process set up as a
worker is (harness.engine.worker.warm_executor on an empty artifact cache of its own), which then runs groups as
a worker does (a path's cases of one structure, the executor made fresh between groups) over structures of the
nightly, context, gradients and zoo suites, evenly spaced by structure key; the sides alternate (A B A B) since
the machine is shared. Each side prints one line: its CPU seconds (this process's: a g++ or linker child of
Inductor's or TVM's is not counted, nor is its wait for them) and wall seconds, the collector's CPU seconds
and collections per generation, its peak RSS, and a digest of its records (harness.engine.execute.comparable:
the collector never changes them); then the ratios of the sums, workers' over Python's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

SUITES = ("nightly", "context", "gradients", "zoo")
STRUCTURES = (3, 2, 1, 2)  # per suite in SUITES: ≈ 35 CPU-s a side on every path
CASES = 2  # inputs run per structure (a group's first compiles, the next reuse it)
PYTHON_THRESHOLDS = (700, 10, 10)  # CPython 3.11's own, what workers ran with before WORKER_GC_THRESHOLDS


def groups(counts) -> list[list]:
    """The cases of each measured structure: `counts[i]` structures of SUITES[i], evenly spaced by key."""
    from cases.suites import suite

    out = []
    for name, n in zip(SUITES, counts):
        if not n:
            continue
        try:
            specs = suite(name)
        except KeyError:  # the zoo without its extra
            continue
        by_key: dict[str, list] = {}
        for spec in specs:
            by_key.setdefault(spec.structure_key(), []).append(spec)
        keys = sorted(by_key)
        out += [by_key[k][:CASES] for k in keys[::max(1, len(keys) // n)][:n]]
    return out


def side(which: str, names: list[str], counts) -> dict:
    """One side in this process: a worker's set-up, then every group; what it cost."""
    import gc

    from harness.engine.cache import ArtifactCache
    from harness.engine.execute import comparable
    from harness.engine.messages import TaskMessage, WorkerConfig
    from harness.engine.warm import warm_modules
    from harness.engine.worker import execute_guarded, warm_executor

    cases = groups(counts)
    root = tempfile.mkdtemp(prefix="normdiff-bench-gc-")
    executor = warm_executor(WorkerConfig("", tuple(sys.path), tuple(warm_modules(names)),
                                          cache=ArtifactCache(root).config()))
    if which == "python":
        gc.set_threshold(*PYTHON_THRESHOLDS)
    spent = {"cpu": [0.0, 0.0, 0.0], "count": [0, 0, 0]}
    began = [0.0]

    def note(phase, info):
        if phase == "start":
            began[0] = time.thread_time()
        else:
            spent["cpu"][info["generation"]] += time.thread_time() - began[0]
            spent["count"][info["generation"]] += 1

    digest = hashlib.sha256()
    wall, cpu = time.perf_counter(), time.process_time()
    gc.callbacks.append(note)
    for group in cases:
        for name in names:
            for i, spec in enumerate(group):
                if i == 0:
                    executor = executor.fresh()
                record = execute_guarded(executor, TaskMessage(i == 0, spec.to_dict(), name, attribute=False))
                digest.update(json.dumps(comparable(record), sort_keys=True, default=str).encode())
    gc.callbacks.remove(note)
    return {"side": which, "thresholds": list(gc.get_threshold()), "structures": len(cases),
            "cpu_s": round(time.process_time() - cpu, 2), "wall_s": round(time.perf_counter() - wall, 2),
            "gc_cpu_s": round(sum(spent["cpu"]), 2), "collections": spent["count"],
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "records": digest.hexdigest()[:16], "load": round(os.getloadavg()[0], 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.commands.bench_gc", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="A B pairs, alternating (default 2)")
    parser.add_argument("--paths", help="comma-separated (default: every built-in path)")
    parser.add_argument("--structures", default=",".join(map(str, STRUCTURES)),
                        help=f"structures per suite of {', '.join(SUITES)} (default %(default)s)")
    parser.add_argument("--side", choices=("python", "workers"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from harness import paths

    names = args.paths.split(",") if args.paths else paths.default_names()
    try:
        counts = [int(n) for n in args.structures.split(",")]
    except ValueError:
        counts = []
    unknown = [n for n in names if n not in paths.names()]
    if unknown or len(counts) != len(SUITES) or min(counts) < 0 or args.rounds < 1:
        print(f"bench_gc: error: {f'unknown path {unknown[0]!r}' if unknown else 'bad --structures or --rounds'}",
              file=sys.stderr)
        return 2
    if args.side:
        print(json.dumps(side(args.side, names, counts)), flush=True)
        os._exit(0)  # a worker's libraries' exit handlers are not what is measured
    lines = []
    for _ in range(args.rounds):
        for which in ("python", "workers"):
            r = subprocess.run([sys.executable, "-m", "harness.commands.bench_gc", "--side", which,
                                "--paths", ",".join(names), "--structures", args.structures],
                               capture_output=True, text=True)
            if r.returncode != 0 or not r.stdout.strip():
                print(f"bench_gc: error: the {which} side failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}",
                      file=sys.stderr)
                return 1
            lines.append(json.loads(r.stdout.strip().splitlines()[-1]))
            print(json.dumps(lines[-1]), flush=True)
    total = {w: {k: sum(x[k] for x in lines if x["side"] == w) for k in ("cpu_s", "wall_s", "gc_cpu_s")}
             for w in ("python", "workers")}
    ratio = {k: round(total["workers"][k] / max(total["python"][k], 1e-9), 3) for k in ("cpu_s", "wall_s", "gc_cpu_s")}
    same = len({x["records"] for x in lines}) == 1
    print(f"gc_cpu_ratio: {ratio['gc_cpu_s']}  cpu_ratio: {ratio['cpu_s']}  wall_ratio: {ratio['wall_s']}  "
          f"records_identical: {'yes' if same else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
