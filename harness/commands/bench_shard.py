"""`make bench`'s cold nightly shard: `limit_ratio` on work the size of a nightly shard, and the run's fixed start.

Why a shard: `limit_ratio` asks how close the scheduler comes to the ideal
(the compilers' and the runs' own seconds spread over the cores). Every run
also pays a fixed start the ideal does not count: torch in the parent, the
forkserver's imports and warm-ups (Inductor's ISA probe among them, which
compiles test programs when the cache is empty), a bridge working meanwhile.
On a sample whose ideal is 20-30 s that start is a third of the wall time,
and the ratio measures the start, not the scheduler. So the ratio is measured
on what the nightly job runs: shard SHARD of the nightly suite (half of it,
as CI splits it: 73 structures, 518 cases, each on every path), whose ideal
is minutes (at least 120 s on a 2-core machine of the development kind),
and the fixed start is printed beside it as its own figure, from the same run.

The shard runs as a fresh `normdiff run` process (what a nightly job starts),
on an empty artifact cache, with its own TMPDIR and XDG_CACHE_HOME (nothing of
an earlier run's caches), the committed baseline (as `make nightly`: known
failures get no attribution), no history. While it runs, this process notes
when each record reaches results.jsonl; the run's warm-ups note when each of
their entries began and ended (harness.engine.warm.WARM_TIMES_ENV); the
process itself notes its `import torch` before it enters the command.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

SUITE = "nightly"
SHARD = (1, 2)  # the nightly job's own split; see the module's docstring for why this size
TIMELINE = "timeline.json"  # beside the shard's results: t0, `import torch`, each record's arrival, the warm-ups
POLL_SECONDS = 0.05  # how often results.jsonl is read while the shard runs: the timeline's resolution
BASELINE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "reports", "baseline.json")


def shard_specs(shard: tuple[int, int] = SHARD):
    """The cases of the measured shard: deterministic (harness.engine.plan.shard orders by case id and keeps
    a structure's cases together), so every bench measures the same work."""
    from cases.suites import suite
    from harness.engine.plan import shard as part

    return part(suite(SUITE), *shard)


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


@dataclass(frozen=True)
class Span:
    """One execution on the clock of the run's process: seconds since that process started."""

    start: float
    end: float


def spans(records: list[dict], arrivals: list[float]) -> list[Span]:
    """Each record's execution, ending when it reached results.jsonl (`arrivals`, seconds since the process
    started) and as long as its worker spent on it (its `seconds` and its attribution's)."""
    return [Span(t - (r.get("seconds") or 0.0) - (r.get("attribution_seconds") or 0.0), t)
            for r, t in zip(records, arrivals)]


def idle_core_seconds(executions: list[Span], jobs: int, until: float) -> float:
    """Core-seconds no execution used between the process's start and `until`: jobs × until minus the busy
    seconds, counting at most `jobs` executions at a time (a record's arrival is late by the parent's
    loop, so a worker's consecutive spans may overlap slightly)."""
    events = sorted([(max(0.0, s.start), 1) for s in executions if s.start < until]
                    + [(min(until, s.end), -1) for s in executions if s.start < until])
    busy, level, last = 0.0, 0, 0.0
    for t, step in events:
        busy += min(level, jobs) * (t - last)
        level, last = level + step, t
    busy += min(level, jobs) * max(0.0, until - last)
    return max(0.0, jobs * until - busy)


@dataclass(frozen=True)
class FixedStart:
    """What a cold run pays before all its workers can execute, in seconds since its process started."""

    torch_s: float  # `import torch` in the run's process
    forkserver_begins_s: float  # when the forkserver began its imports (the parent's own start before it)
    forkserver_s: float  # the forkserver's imports and warm-ups, collection included
    inductor_s: float  # of which Inductor's warm-ups (its ISA probe, which compiles on an empty cache)
    first_execution_s: float  # when the first execution began (a bridge's, while the forkserver imports)
    idle_core_s: float  # core-seconds no execution used until the forkserver's workers could start

    @property
    def seconds(self) -> float:
        """The fixed start: until the forkserver's workers could start, so every core could execute."""
        return self.forkserver_begins_s + self.forkserver_s

    def line(self) -> str:
        return (f"fixed_start_s: {self.seconds:.1f}  torch_in_parent_s: {self.torch_s:.1f}  "
                f"forkserver_warm_s: {self.forkserver_s:.1f}  inductor_warm_up_s: {self.inductor_s:.1f}  "
                f"first_execution_s: {self.first_execution_s:.1f}  start_idle_core_s: {self.idle_core_s:.1f}")


def fixed_start(t0: float, torch_times: tuple[float, float], warm_lines: list[dict], executions: list[Span],
                jobs: int, inductor_entries: frozenset[str]) -> FixedStart:
    """The fixed start of a run whose process started at `t0` (wall clock): `torch_times` its `import torch`
    (wall clock, begin and end), `warm_lines` what its warm-ups noted (harness.engine.warm), `executions`
    its timeline (seconds since t0), `inductor_entries` Inductor's warm-up entries. The forkserver is the
    warm-up that ran outside a multiprocessing worker (the longest, if a run started several)."""
    servers = [w for w in warm_lines if not w.get("worker") and w.get("entries")]
    if servers:
        server = max(servers, key=lambda w: w["end"] - w["entries"][0][1])
        begins, ends = server["entries"][0][1] - t0, server["end"] - t0
        inductor = sum(b - a for name, a, b in server["entries"] if name in inductor_entries)
    else:  # no forkserver imported anything (--jobs 0, or every module already in the run's process)
        begins = ends = min((s.start for s in executions), default=0.0)
        inductor = 0.0
    return FixedStart(torch_s=torch_times[1] - torch_times[0], forkserver_begins_s=begins,
                      forkserver_s=ends - begins, inductor_s=inductor,
                      first_execution_s=min((s.start for s in executions), default=0.0),
                      idle_core_s=idle_core_seconds(executions, jobs, ends))


@dataclass(frozen=True)
class ShardRun:
    """The cold shard's figures."""

    executions: int
    cold_s: float  # from the process's start to its last record (its reports after are not the scheduler's)
    ideal_s: float
    start: FixedStart
    exit_code: int

    @property
    def limit_ratio(self) -> float:
        return self.cold_s / self.ideal_s

    def line(self) -> str:
        return (f"limit_ratio: {self.limit_ratio:.2f}  shard_cold_s: {self.cold_s:.1f}  "
                f"shard_ideal_s: {self.ideal_s:.1f}  shard_executions: {self.executions}")


def child(stamp_file: str, argv: list[str]) -> int:
    """The shard's process: `import torch` timed (wall clock) into `stamp_file`, then `normdiff` with `argv`."""
    begin = time.time()
    import torch  # noqa: F401 - what the run's process pays first

    end = time.time()
    with open(stamp_file, "w", encoding="utf-8") as fh:
        json.dump({"torch": [begin, end]}, fh)
    from harness.commands.main import main

    return main(argv)


def run_shard(names: list[str], jobs: int, out: str, shard: tuple[int, int] = SHARD, log=None) -> ShardRun:
    """Run the shard cold in a fresh process and measure it (see the module's docstring)."""
    from harness import paths
    from harness.core.records import read_results
    from harness.engine.warm import WARM_TIMES_ENV

    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    scratch = tempfile.mkdtemp(prefix="normdiff-bench-shard-")
    try:
        for sub in ("tmp", "xdg", "cache"):
            os.makedirs(os.path.join(scratch, sub))
        stamps, warm_times = os.path.join(scratch, "torch.json"), os.path.join(scratch, "warm.jsonl")
        env = dict(os.environ, TMPDIR=os.path.join(scratch, "tmp"), XDG_CACHE_HOME=os.path.join(scratch, "xdg"),
                   **{WARM_TIMES_ENV: warm_times})
        argv = ["run", "--suite", SUITE, "--shard", f"{shard[0]}/{shard[1]}", "--paths", ",".join(names),
                "--jobs", str(jobs), "--out", out, "--cache", os.path.join(scratch, "cache"), "--quiet",
                "--no-history"] + (["--baseline", BASELINE] if os.path.exists(BASELINE) else [])
        results = os.path.join(out, "results.jsonl")
        t0 = time.time()
        proc = subprocess.Popen([sys.executable, "-m", "harness.commands.bench_shard", "--child", stamps, *argv],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        arrivals, err = watch(proc, results, t0)
        records = read_results(results) if os.path.exists(results) else []
        if proc.returncode not in (0, 1) or not records:
            tail = (err.strip().splitlines() or [""])[-1][:200]
            raise RuntimeError(f"the shard's run exited {proc.returncode} with {len(records)} records: {tail}")
        if len(arrivals) != len(records):
            raise RuntimeError(f"{len(arrivals)} arrivals noted for {len(records)} records")
        with open(stamps, encoding="utf-8") as fh:
            torch_times = tuple(json.load(fh)["torch"])
        warm_lines = []
        if os.path.exists(warm_times):
            with open(warm_times, encoding="utf-8") as fh:
                warm_lines = [json.loads(line) for line in fh if line.strip()]
        inductor = frozenset(e for e in paths.get("inductor").warm_imports if ":" in e) \
            if "inductor" in paths.names() else frozenset()
        with open(os.path.join(out, TIMELINE), "w", encoding="utf-8") as fh:  # to see later who waited when
            json.dump({"t0": t0, "torch": torch_times, "arrivals": arrivals, "warm_ups": warm_lines}, fh)
        timeline = spans(records, arrivals)
        start = fixed_start(t0, torch_times, warm_lines, timeline, jobs, inductor)
        if log:
            log(f"shard {shard[0]}/{shard[1]}: {len(records)} executions, exit {proc.returncode}")
            for w in warm_lines:
                top = sorted(w["entries"], key=lambda e: e[1] - e[2])[:6]
                log(f"warm-up of {'a worker' if w['worker'] else 'the forkserver'} (pid {w['pid']}): "
                    f"{w['entries'][0][1] - t0:.1f} → {w['end'] - t0:.1f} s; longest: "
                    + ", ".join(f"{name} {b - a:.1f}" for name, a, b in top))
        return ShardRun(len(records), max(arrivals), limit_seconds(records, jobs), start, proc.returncode)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def watch(proc: subprocess.Popen, results: str, t0: float) -> tuple[list[float], str]:
    """Until `proc` exits: when each line of `results` appeared (seconds since t0), and its stderr."""
    import threading

    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)
    reader.start()
    arrivals: list[float] = []
    offset, partial = 0, b""
    while True:
        done = proc.poll() is not None
        try:
            with open(results, "rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except OSError:
            data = b""
        now = time.time() - t0
        offset += len(data)
        partial += data
        lines = partial.split(b"\n")
        partial = lines.pop()
        arrivals += [now] * sum(1 for line in lines if line.strip())
        if done:
            break
        time.sleep(POLL_SECONDS)
    reader.join()
    return arrivals, "".join(err)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(argv[1], argv[2:])
    import argparse

    from harness import paths

    parser = argparse.ArgumentParser(prog="python -m harness.commands.bench_shard",
                                     description="make bench's cold nightly shard alone: limit_ratio and the "
                                                 "fixed start")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", default=os.path.join("reports", "bench", "shard"))
    args = parser.parse_args(argv)
    if args.jobs < 1:
        print("bench_shard: error: --jobs must be >= 1", file=sys.stderr)
        return 2
    measured = run_shard(paths.default_names(), args.jobs, args.out,
                         log=lambda msg: print(f"bench: {msg}", file=sys.stderr, flush=True))
    print(measured.line())
    print(measured.start.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
