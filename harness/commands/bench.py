"""`make bench`: the warm runner against a fresh process per execution, on one fixed set.

Why: the runner exists to make the nightly gate affordable (imports paid once
per worker, compiles once per structure, all cores busy). This measures that
claim on a fixed set of executions shaped like the nightly suite (several
input variants per structure, every path), two ways in one go:

* naive: one fresh `python` per execution, one after another, no reuse, as a
  shell loop over `normdiff run --case` would do; measured on a seeded random
  sample, since each costs seconds of imports;
* runner: `run()` with --jobs workers over the whole set.

It prints five lines on stdout (details go to stderr):

    naive_exec_per_s: A
    runner_exec_per_s: B
    speedup: B/A
    cache_hit_rate: H      (share of runner executions that reused a compiled artifact)
    limit_ratio: R         (runner wall time over the ideal: export+compile+run seconds of
                            each distinct structure plus run seconds of the rest, / jobs)
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter

# Structures as the nightly suite builds them (seed 0, so a "normal" parameter
# draw is part of the structure), each crossed with INPUTS.
STRUCTURES = [
    {"pattern": "layer_norm", "dtype": "float16", "shape": [4, 256], "params": {"kind": "normal"}},
    {"pattern": "layer_norm", "style": "upcast", "dtype": "bfloat16", "shape": [4, 256]},
    {"pattern": "layer_norm", "style": "manual", "dtype": "float16", "shape": [2, 512]},
    {"pattern": "layer_norm", "dtype": "float32", "shape": [1, 4096]},
    {"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 8, 64], "params": {"kind": "normal"}},
    {"pattern": "rms_norm", "style": "llama", "dtype": "bfloat16", "shape": [4, 256], "params": {"kind": "normal"}},
    {"pattern": "rms_norm", "style": "gemma", "dtype": "float16", "shape": [4, 256]},
    {"pattern": "group_norm", "dtype": "float16", "shape": [2, 8, 4, 4], "groups": 4, "params": {"kind": "normal"}},
    {"pattern": "instance_norm", "dtype": "bfloat16", "shape": [2, 4, 16]},
    {"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3], "params": {"kind": "normal"}},
]
INPUTS = [
    {"kind": "normal"},
    {"kind": "uniform", "low": -1.0, "high": 3.0},
    {"kind": "alternating", "amplitude": 0.25, "offset": 0.0},
    {"kind": "outlier", "std": 1.0, "scale": 100.0},
]
NAIVE_SAMPLE = 20
SAMPLE_SEED = 0


def bench_specs():
    """The fixed set: every structure with every input variant."""
    from harness.core.spec import CaseSpec

    return [CaseSpec.from_dict({**s, "input": i}) for s in STRUCTURES for i in INPUTS]


def naive_one(spec_json: str, path: str) -> int:
    """One execution in this fresh process: what the naive loop pays for each."""
    from harness.engine.execute import execute

    record = execute(json.loads(spec_json), path)
    print(json.dumps({"verdict": record["verdict"], "max_abs_err": record["max_abs_err"]}))
    return 0


def run_naive(sample: list[tuple]) -> tuple[float, list[dict]]:
    """Wall seconds of running `sample` one fresh process at a time, and what each said."""
    out = []
    start = time.monotonic()
    for spec, path in sample:
        r = subprocess.run([sys.executable, "-m", "harness.commands.bench", "--one", spec.to_json(), path],
                           capture_output=True, text=True)
        lines = r.stdout.strip().splitlines()
        if r.returncode == 0 and lines:
            out.append(json.loads(lines[-1]))
        else:
            out.append({"verdict": f"exit {r.returncode}", "stderr": r.stderr.strip().splitlines()[-1:]})
    return time.monotonic() - start, out


def limit_seconds(records: list[dict], jobs: int) -> float:
    """The ideal wall time: each distinct structure's first export+compile+run, the rest's runs, over jobs."""
    seen, total = set(), 0.0
    for r in records:
        key = (r["path"], r.get("structure_key"))
        if key not in seen and not r.get("cache_hit"):
            seen.add(key)
            total += r.get("prepare_seconds") or 0.0
        total += r.get("run_seconds") or 0.0
    return total / jobs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.commands.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--sample", type=int, default=NAIVE_SAMPLE, help="naive executions measured")
    parser.add_argument("--paths", help="comma-separated (default: every built-in path)")
    parser.add_argument("--out", default=os.path.join("reports", "bench"), help="the runner's results")
    parser.add_argument("--one", nargs=2, metavar=("SPEC_JSON", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        return naive_one(*args.one)
    if args.jobs < 1 or args.sample < 1:
        print("bench: error: --jobs and --sample must be >= 1", file=sys.stderr)
        return 2

    from harness import paths
    from harness.engine.run import run

    names = args.paths.split(",") if args.paths else paths.default_names()
    unknown = [n for n in names if n not in paths.names()]
    if unknown:
        print(f"bench: error: unknown path {unknown[0]!r}", file=sys.stderr)
        return 2
    specs = bench_specs()
    executions = [(s, p) for s in specs for p in names]
    log = lambda msg: print(f"bench: {msg}", file=sys.stderr, flush=True)  # noqa: E731
    log(f"{len(executions)} executions: {len(specs)} cases ({len(STRUCTURES)} structures × "
        f"{len(INPUTS)} inputs) × {len(names)} paths; runner with --jobs {args.jobs}")

    start = time.monotonic()
    records = run(specs, names, args.out, jobs=args.jobs, progress=sys.stderr.isatty())
    runner_wall = time.monotonic() - start
    verdicts = Counter(r["verdict"] for r in records)
    log(f"runner: {len(records)} executions in {runner_wall:.1f} s ({dict(verdicts)}); "
        f"results in {args.out}/results.jsonl")

    sample = random.Random(SAMPLE_SEED).sample(executions, min(args.sample, len(executions)))
    log(f"naive: {len(sample)} sampled executions, a fresh process each, one at a time …")
    naive_wall, naive_out = run_naive(sample)
    table = {(r["case_id"], r["path"]): r for r in records}
    agree = 0
    for (s, p), o in zip(sample, naive_out):
        mine = table.get((s.case_id, p), {})
        if (mine.get("verdict"), mine.get("max_abs_err")) == (o["verdict"], o.get("max_abs_err")):
            agree += 1
        else:
            log(f"differs: {p} on {s.case_id}: naive {o['verdict']} {o.get('max_abs_err')} {o.get('stderr', '')}, "
                f"runner {mine.get('verdict')} {mine.get('max_abs_err')}")
    log(f"naive: {naive_wall:.1f} s, {naive_wall / len(sample):.2f} s per execution; "
        f"{agree}/{len(sample)} give the runner's verdict and error exactly")

    naive_rate = len(sample) / naive_wall
    runner_rate = len(records) / runner_wall
    hits = sum(bool(r.get("cache_hit")) for r in records) / max(1, len(records))
    ideal = limit_seconds(records, args.jobs)
    whole = sum(r.get("seconds") or 0.0 for r in records)
    log(f"ideal: {ideal:.1f} s (export+compile+run only); with reference and scoring "
        f"{whole / args.jobs:.1f} s, ratio {runner_wall / (whole / args.jobs):.2f}")
    print(f"naive_exec_per_s: {naive_rate:.3f}")
    print(f"runner_exec_per_s: {runner_rate:.3f}")
    print(f"speedup: {runner_rate / naive_rate:.1f}")
    print(f"cache_hit_rate: {hits:.3f}")
    print(f"limit_ratio: {runner_wall / ideal:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
