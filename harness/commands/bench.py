"""`make bench`: the warm runner against a fresh process per execution, cold vs warm artifact cache,
forkserver vs Ray, `limit_ratio` and the fixed start on a cold nightly shard, the smoke suite and a zoo
sample cold and warm, and the program fuzzer's rate, in one run.

Why: the runner exists to make the nightly gate affordable (imports paid once
per worker, compiles once per structure, all cores busy, compiled artifacts
kept on disk between runs). This measures those claims on a fixed set of
executions shaped like the nightly suite (several input variants per
structure, every path), in one go:

* naive: one fresh `python` per execution, one after another, no reuse, as a
  shell loop over `normdiff run --case` would do; measured on a seeded random
  sample, since each costs seconds of imports;
* cold: `run()` with --jobs forkserver workers and an empty artifact cache;
* warm: the same again with the cache the cold run filled;
* ray: the warm run on a local Ray with --jobs CPUs (skipped without Ray);
* shard: a nightly shard cold, as a fresh `normdiff run` process on an empty
  cache (harness.commands.bench_shard): `limit_ratio` on work whose ideal is
  minutes, and the run's fixed start beside it;
* smoke: the smoke suite cold (its own empty cache) and warm;
* shapes: the shapes suite cold and warm, and each path's compiles against its executions
  (harness.commands.bench_shapes);
* gradients: a sample of the gradients suite's structures cold and warm, and where the cold run's seconds went
  (harness.commands.bench_where);
* zoo: ZOO_STRUCTURES module structures of the zoo suite (both inputs each)
  cold and warm (skipped, in one line, without the zoo extra);
* fuzz: `normdiff fuzz --programs --paths executorch-recompose --minutes M`,
  its examples per minute read from its fuzz.json.

Each run starts its own forkserver (or Ray), as a fresh `normdiff run` does.
"Identical" compares every record key but timings and where artifacts came
from (harness.engine.execute.comparable): verdicts, errors, dtypes, facts,
attributions. It prints on stdout (details go to stderr):

    naive_exec_per_s: A
    runner_exec_per_s: B          (the cold run)
    speedup: B/A
    cache_hit_rate: H             (cold run: share of executions that reused an artifact in memory)
    limit_ratio: R  shard_cold_s: C  shard_ideal_s: I  shard_executions: E
                                  (the nightly shard, cold: its wall time from its process's start to its
                                   last record over the ideal: export+compile+run seconds of each distinct
                                   structure plus run seconds of the rest, / jobs; or "limit_ratio: skipped (…)")
    fixed_start_s: S  torch_in_parent_s: T  forkserver_warm_s: F  inductor_warm_up_s: P
        first_execution_s: X  start_idle_core_s: D
                                  (the same run: until its forkserver's workers could start; see bench_shard)
    cold_s: C  warm_s: W  warm_speedup: C/W
    compile_cold_s: P  compile_warm_s: Q  compile_speedup: P/Q
                                  (prepare seconds of the cacheable paths: the compile-bound part)
    ray_s: Y  ray_vs_forkserver: Y/W   (or "ray: skipped (…)")
    verdicts_identical: yes|no    (cold, warm and ray give the same records)
    smoke_cold_s: C  smoke_warm_s: W  smoke_warm_speedup: C/W  smoke_identical: yes|no
    shapes_cold_s: C  shapes_warm_s: W  shapes_warm_speedup: C/W  shapes_identical: yes|no
    shapes_compiles_per_executions: PATH=C/E …   (or "shapes: skipped (--no-shapes)")
    shapes_seconds: compile C (P%)  run R (P%)  setup+scoring S (P%)  attribution A  builds B  static_controls N
      shapes PATH: compile …  run …  setup+scoring …   (one line per path, the most compile first)
    gradients_cold_s: C  gradients_warm_s: W  gradients_warm_speedup: C/W  gradients_identical: yes|no
    gradients_seconds: … and its paths' lines, as the shapes'   (or "gradients: skipped (--no-gradients)")
    structures_shared_across_suites: SUITE=S/N …  (of the suites make nightly runs: N structure keys, S of
                                  them in another suite too: compiled once for both through the artifact cache)
    zoo_cold_s: C  zoo_warm_s: W  zoo_warm_speedup: C/W  zoo_identical: yes|no   (or "zoo: skipped (…)")
    fuzz_examples_per_minute: F   (or "fuzz: failed (…)" / "fuzz: skipped (--no-fuzz)")
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

from harness.spec import input_of

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
    input_of("outlier"),
]
NAIVE_SAMPLE = 20
SAMPLE_SEED = 0
ZOO_STRUCTURES = 12  # module structures of the zoo suite, evenly spaced by structure key, each with both its inputs
FUZZ_MINUTES = 1.0
FUZZ_PATH = "executorch-recompose"


def bench_specs():
    """The fixed set: every structure with every input variant."""
    from harness.spec import CaseSpec

    return [CaseSpec.from_dict({**s, "input": i}) for s in STRUCTURES for i in INPUTS]


def naive_one(spec_json: str, path: str) -> int:
    """One execution in this fresh process: what the naive loop pays for each."""
    from harness.engine.execute import execute

    record = execute(json.loads(spec_json), path)  # no persistent cache: every execution pays in full
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


def timed_run(specs, names, out, jobs, cache, executor="local") -> tuple[float, list[dict]]:
    from harness.engine.run import run
    from harness.engine.warm import stop_forkserver

    stop_forkserver()  # the run pays its own warm-up, as a fresh command does
    start = time.monotonic()
    records = run(specs, names, out, jobs=jobs, progress=sys.stderr.isatty(), cache=cache, executor=executor)
    return time.monotonic() - start, records


def compile_seconds(records: list[dict]) -> float:
    """Prepare seconds of the executions whose artifact the cache keeps (the compile-bound part)."""
    from harness.engine.cache import Origin

    return sum(r.get("prepare_seconds") or 0.0 for r in records if r.get("artifact_cache") in (Origin.HIT, Origin.MISS))


def outcomes(records: list[dict]) -> dict:
    """Each execution's record as a warm run must repeat it (harness.engine.execute.comparable), as JSON."""
    from harness.engine.execute import comparable

    return {(r["case_id"], r["path"]): json.dumps(comparable(r), sort_keys=True, default=str) for r in records}


def zoo_sample():
    """ZOO_STRUCTURES structures of the zoo suite with all their cases, or the reason there are none."""
    from cases.suites import suite
    from harness.zoo.catalog import installed

    if not installed():
        return [], "the zoo extra is not installed: pip install 'normdiff[zoo]'"
    by_structure: dict[str, list] = {}
    for spec in suite("zoo"):
        by_structure.setdefault(spec.structure_key(), []).append(spec)
    keys = sorted(by_structure)
    step = max(1, len(keys) // ZOO_STRUCTURES)
    return [s for k in keys[::step][:ZOO_STRUCTURES] for s in by_structure[k]], ""


def cold_and_warm(specs, names, out, jobs) -> tuple[float, float, bool, list[dict]]:
    """(cold seconds, warm seconds, identical, the cold records) of `specs` on their own empty cache."""
    import shutil
    import tempfile

    from harness.engine.cache import ArtifactCache

    root = tempfile.mkdtemp(prefix="normdiff-bench-cache-")
    try:
        cold_wall, cold = timed_run(specs, names, os.path.join(out, "cold"), jobs, ArtifactCache(root))
        warm_wall, warm = timed_run(specs, names, os.path.join(out, "warm"), jobs, ArtifactCache(root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return cold_wall, warm_wall, outcomes(cold) == outcomes(warm), cold


def fuzz_rate(minutes: float, out: str) -> tuple[float | None, str]:
    """`normdiff fuzz --programs` examples per minute on FUZZ_PATH (read from its fuzz.json), or why not."""
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "harness", "fuzz", "--programs", "--paths", FUZZ_PATH, "--minutes", f"{minutes:g}",
           "--out", out, "--seed", "0", "--database", "none"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    try:
        with open(os.path.join(out, "fuzz.json"), encoding="utf-8") as fh:
            return float(json.load(fh)["examples_per_minute"]), ""
    except (OSError, ValueError, KeyError, TypeError):
        tail = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        return None, f"exit {r.returncode}, no fuzz.json: {tail[:200]}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.commands.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--sample", type=int, default=NAIVE_SAMPLE, help="naive executions measured")
    parser.add_argument("--paths", help="comma-separated (default: every built-in path)")
    parser.add_argument("--out", default=os.path.join("reports", "bench"), help="the runs' results")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray run")
    parser.add_argument("--no-bridges", action="store_true",
                        help="every worker waits for the forkserver's imports (the runner before bridges)")
    parser.add_argument("--no-shard", action="store_true",
                        help="skip the cold nightly shard (limit_ratio and the fixed start)")
    parser.add_argument("--no-smoke", action="store_true", help="skip the smoke suite's cold and warm runs")
    parser.add_argument("--no-shapes", action="store_true", help="skip the shapes suite's cold and warm runs")
    parser.add_argument("--no-gradients", action="store_true",
                        help="skip the gradients sample's cold and warm runs")
    parser.add_argument("--no-zoo", action="store_true", help="skip the zoo sample's cold and warm runs")
    parser.add_argument("--fuzz-minutes", type=float, default=FUZZ_MINUTES,
                        help=f"how long the program fuzzer runs (default {FUZZ_MINUTES:g}; 0 skips it)")
    parser.add_argument("--one", nargs=2, metavar=("SPEC_JSON", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        return naive_one(*args.one)
    if args.jobs < 1 or args.sample < 1 or args.fuzz_minutes < 0:
        print("bench: error: --jobs and --sample must be >= 1, --fuzz-minutes >= 0", file=sys.stderr)
        return 2

    import shutil
    import tempfile

    from harness import paths
    from harness.commands.bench_shard import SHARD, limit_seconds, run_shard
    from harness.commands.bench_where import time_lines
    from harness.core.records import read_results
    from harness.engine import ray_executor
    from harness.engine.cache import ArtifactCache
    from harness.engine.scheduler import Runner

    Runner.bridging = not args.no_bridges

    names = args.paths.split(",") if args.paths else paths.default_names()
    unknown = [n for n in names if n not in paths.names()]
    if unknown:
        print(f"bench: error: unknown path {unknown[0]!r}", file=sys.stderr)
        return 2
    specs = bench_specs()
    executions = [(s, p) for s in specs for p in names]
    log = lambda msg: print(f"bench: {msg}", file=sys.stderr, flush=True)  # noqa: E731
    log(f"{len(executions)} executions: {len(specs)} cases ({len(STRUCTURES)} structures × "
        f"{len(INPUTS)} inputs) × {len(names)} paths; runner with --jobs {args.jobs}; load average "
        + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    cache_root = tempfile.mkdtemp(prefix="normdiff-bench-cache-")
    try:
        cache = ArtifactCache(cache_root)
        cold_wall, records = timed_run(specs, names, os.path.join(args.out, "cold"), args.jobs, cache)
        log(f"cold: {len(records)} executions in {cold_wall:.1f} s "
            f"({dict(Counter(r['verdict'] for r in records))}); results in {args.out}/cold/results.jsonl")
        warm_wall, warm = timed_run(specs, names, os.path.join(args.out, "warm"), args.jobs, cache)
        log(f"warm: {warm_wall:.1f} s, {Counter(r['artifact_cache'] for r in warm)}")
        ray_wall, on_ray, ray_note = None, [], "not installed (pip install 'normdiff[ray]')"
        if args.no_ray:
            ray_note = "--no-ray"
        elif ray_executor.available():
            ray_wall, on_ray = timed_run(specs, names, os.path.join(args.out, "ray"), args.jobs, cache, "ray")
            log(f"ray (local, {args.jobs} CPUs, warm cache): {ray_wall:.1f} s")
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    same = outcomes(records) == outcomes(warm) and (not on_ray or outcomes(on_ray) == outcomes(records))

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
    runner_rate = len(records) / cold_wall
    hits = sum(bool(r.get("cache_hit")) for r in records) / max(1, len(records))
    ideal = limit_seconds(records, args.jobs)
    whole = sum(r.get("seconds") or 0.0 for r in records)
    log(f"sample: ideal {ideal:.1f} s (export+compile+run only), cold over it {cold_wall / ideal:.2f}; with "
        f"reference and scoring {whole / args.jobs:.1f} s, ratio {cold_wall / (whole / args.jobs):.2f}")
    shard, shard_note = None, "--no-shard"
    if not args.no_shard:
        log(f"shard: the {SHARD[0]}/{SHARD[1]} shard of the nightly suite, cold, a fresh process … (load average "
            + " ".join(f"{v:.2f}" for v in os.getloadavg()) + ")")
        try:
            shard = run_shard(names, args.jobs, os.path.join(args.out, "shard"), log=log)
        except RuntimeError as exc:  # the run failed: the other figures still stand
            shard_note = f"failed: {exc}"
    compile_cold, compile_warm = compile_seconds(records), compile_seconds(warm)
    print(f"naive_exec_per_s: {naive_rate:.3f}")
    print(f"runner_exec_per_s: {runner_rate:.3f}")
    print(f"speedup: {runner_rate / naive_rate:.1f}")
    print(f"cache_hit_rate: {hits:.3f}")
    if shard is not None:
        print(shard.line())
        print(shard.start.line())
        print("\n".join(time_lines("shard", read_results(os.path.join(args.out, "shard", "results.jsonl")))))
    else:
        print(f"limit_ratio: skipped ({shard_note})")
    print(f"cold_s: {cold_wall:.1f}  warm_s: {warm_wall:.1f}  warm_speedup: {cold_wall / warm_wall:.1f}")
    print(f"compile_cold_s: {compile_cold:.1f}  compile_warm_s: {compile_warm:.2f}  "
          f"compile_speedup: {compile_cold / max(compile_warm, 1e-6):.0f}")
    if ray_wall is not None:
        print(f"ray_s: {ray_wall:.1f}  ray_vs_forkserver: {ray_wall / warm_wall:.2f}")
    else:
        print(f"ray: skipped ({ray_note})")
    print(f"verdicts_identical: {'yes' if same else 'no'}")
    sys.stdout.flush()
    more_lines(args, names, log)
    return 0


def more_lines(args, names: list[str], log) -> None:
    """The smoke suite, the shapes suite, the gradients and zoo samples cold and warm, the structures the
    nightly's suites share, and the program fuzzer's rate: their lines."""
    from cases.suites import suite

    yes = {True: "yes", False: "no"}
    if not args.no_smoke:
        cold, warm, same, _ = cold_and_warm(suite("smoke"), names, os.path.join(args.out, "smoke"), args.jobs)
        log(f"smoke: cold {cold:.1f} s, warm {warm:.1f} s")
        print(f"smoke_cold_s: {cold:.1f}  smoke_warm_s: {warm:.1f}  smoke_warm_speedup: {cold / warm:.1f}  "
              f"smoke_identical: {yes[same]}", flush=True)
    if args.no_shapes:
        print("shapes: skipped (--no-shapes)", flush=True)
    else:
        from harness.commands.bench_shapes import shapes_lines

        print("\n".join(shapes_lines(names, args.out, args.jobs, log, cold_and_warm)), flush=True)
    if args.no_gradients:
        print("gradients: skipped (--no-gradients)", flush=True)
    else:
        from harness.commands.bench_where import gradients_lines

        print("\n".join(gradients_lines(names, args.out, args.jobs, log, cold_and_warm)), flush=True)
    zoo, why = ([], "--no-zoo") if args.no_zoo else zoo_sample()
    if zoo:
        log(f"zoo: {len(zoo)} module cases ({len({s.structure_key() for s in zoo})} structures) x {len(names)} paths")
        cold, warm, same, _ = cold_and_warm(zoo, names, os.path.join(args.out, "zoo"), args.jobs)
        print(f"zoo_cold_s: {cold:.1f}  zoo_warm_s: {warm:.1f}  zoo_warm_speedup: {cold / warm:.1f}  "
              f"zoo_identical: {yes[same]}", flush=True)
    else:
        print(f"zoo: skipped ({why})", flush=True)
    from harness.commands.bench_where import shared_line

    print(shared_line(), flush=True)
    if args.fuzz_minutes > 0:
        rate, why = fuzz_rate(args.fuzz_minutes, os.path.join(args.out, "fuzz"))
        print(f"fuzz_examples_per_minute: {rate:.1f}" if rate is not None else f"fuzz: failed ({why})", flush=True)
    else:
        print("fuzz: skipped (--fuzz-minutes 0)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
