"""The runner: cases × paths through warm, isolated worker processes.

Why it is built this way:

* Imports (torch, TVM, ExecuTorch) cost seconds, so they are paid once: a
  forkserver imports them and forks each worker from that warm state. A
  crashed worker is replaced in milliseconds, not seconds.
* Compiles cost seconds, so executions are grouped by (path, structure key)
  and a group runs on one worker, reusing the artifact it prepared; records
  say whether they hit that cache. Groups start largest-estimated-first, and an
  idle worker takes the tail of a long group when the work it takes outweighs
  the compile it must repeat (estimates learnt from the records so far).
* A worker that dies costs one `crash` record (with the signal and the tail of
  its stderr), one past the timeout one `timeout` record; a fresh worker takes
  over the rest of its group. A worker that dies before starting a task does
  not get that task blamed.
* Each record is appended and flushed as it arrives, so a killed run can be
  resumed; Ctrl-C (or SIGTERM) stops at once, keeping what finished.
* Workers run torch and TVM single-threaded: the jobs share the cores, and a
  record then does not depend on --jobs.

`run()` is the whole-run entry point (results.jsonl, resume, progress);
`Runner` runs a task list; `Pool` keeps one warm worker per path for callers
that ask for a few executions at a time (fuzz, the pytest plugin). `jobs=0`
runs in this process (no isolation), for quick scripts and debugging. As with
any multiprocessing code, a script that calls these needs the
`if __name__ == "__main__":` guard (workers re-import the main module).
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Callable, Iterable

from harness import paths
from harness.core.errors import UsageError
from harness.core.records import Record, ResultsWriter, read_results
from harness.spec import CaseSpec
from harness.core.memory import default_max_memory_gb
from harness.core.verdicts import DEFAULT_TIMEOUT
from harness.attribution.policy import Policy
from harness.engine.cache import ArtifactCache, library_caches
from harness.engine.execute import Executor, started
from harness.engine.lock import folder_lock
from harness.engine.plan import Task, plan
from harness.engine.preflight import preflight, unresolved_record
from harness.modules import LIFT
from harness.engine.procs import RunnerError
from harness.engine.progress import Progress
from harness.engine.scheduler import Runner


def run(specs: list[CaseSpec], path_names: list[str], out_dir: str, *, jobs: int | None = None,
        timeout: float = DEFAULT_TIMEOUT, resume: bool = False, progress: bool = True,
        max_memory: float | None = None, cache: ArtifactCache | None = None, executor: str = "local",
        address: str | None = None, policy: Policy | None = None,
        finish: Callable[[bool], None] | None = None) -> list[Record]:
    """Run specs × paths, appending records to out_dir/results.jsonl; return this run's records.

    The folder is locked for the run (FolderBusy, a UsageError, if another
    process writes it), and for `finish` (the caller's reports), called as
    the run ends with whether it finished (False: interrupted, or its
    workers could not go on; not called for a bad spec, which writes
    nothing): the lock is decided here, for every caller. With `resume`,
    executions already recorded in results.jsonl are skipped and the file is appended to (UsageError if it was
    written with other library versions); otherwise it is started afresh.
    `max_memory` is each worker's limit in GB (default: default_max_memory_gb).
    `cache` is the persistent artifact cache (None: every artifact is built).
    `policy` says which failures get an attribution (harness.attribution.policy; None: every one).
    `executor` "ray" runs on Ray actors (`address`: a cluster to join, else a
    local one; `jobs` None: one actor per CPU of the cluster).
    Ctrl-C or SIGTERM raises KeyboardInterrupt after the workers are stopped;
    every record written so far stays. Module cases are resolved first, on the
    workers (harness.engine.preflight): a bad one is a UsageError before
    anything is written.
    """
    with folder_lock(out_dir):
        try:
            records = _run_locked(specs, path_names, out_dir, jobs=jobs, timeout=timeout, resume=resume,
                                  progress=progress, max_memory=max_memory, cache=cache, executor=executor,
                                  address=address, policy=policy)
        except (KeyboardInterrupt, RunnerError):  # what finished stays, and is reported (a bad spec: nothing)
            if finish is not None:
                finish(False)
            raise
        if finish is not None:
            finish(True)
        return records


def _run_locked(specs, path_names, out_dir, *, jobs, timeout, resume, progress, max_memory, cache, executor,
                address, policy) -> list[Record]:
    """run(), its folder locked."""
    results_path = os.path.join(out_dir, "results.jsonl")
    tasks = plan(specs, path_names)
    if jobs is None and executor == "local":
        jobs = default_jobs()
    if max_memory is None and jobs:  # the run's share per worker, for the preflight's fewer workers too
        max_memory = default_max_memory_gb(jobs)
    options = dict(timeout=timeout, max_memory=max_memory, cache=cache, executor=executor, address=address,
                   policy=policy)
    digests: dict[str, str] = {}
    # The lift's workers fork from a forkserver that imports the run's paths too: the run's own workers
    # then fork from it at once (a run that compiles replaces it with one that also ran the warm-ups).
    unresolved = preflight(specs, lambda lift, on: execute_tasks(lift, on, jobs=_lift_jobs(jobs, lift),
                                                                 path_names=[LIFT, *path_names], **options),
                           single=len(specs) == 1, digests=digests)
    done_now = [unresolved_record(started(t.spec, t.path), unresolved[t.spec.structure_key()])
                for t in tasks if t.spec.is_module and t.spec.structure_key() in unresolved]
    tasks = [t for t in tasks if not (t.spec.is_module and t.spec.structure_key() in unresolved)]
    done: set = set()
    if resume and os.path.exists(results_path):
        _trim_torn_line(results_path)
        earlier = read_results(results_path)
        _check_versions(earlier, results_path)
        done = {(r["case_id"], r["path"]) for r in earlier}
        tasks = [t for t in tasks if t.key not in done]
    elif os.path.exists(results_path):
        os.remove(results_path)
    if resume:
        done_now = [r for r in done_now if r.key not in done]
    records: list[Record] = []
    bar = Progress(len(tasks) + len(done_now), progress)
    with ResultsWriter(results_path) as writer, _sigterm_as_interrupt():
        def on_record(record: Record) -> None:
            writer.write(record)
            records.append(record)
            bar.update(record)

        for record in done_now:
            on_record(record)

        try:
            execute_tasks(tasks, on_record, jobs=jobs, path_names=path_names, module_digests=digests, **options)
        finally:
            bar.close()
    return records


def default_jobs() -> int:
    """The local workers of a run not told how many: one per core (the Ray executor asks its cluster)."""
    return os.cpu_count() or 1


def _lift_jobs(jobs: int | None, tasks: list[Task]) -> int | None:
    """Workers for the module cases' resolution: no more than there are structures."""
    return jobs if not jobs else min(jobs, len(tasks))


def _check_versions(records: list[dict], where: str) -> None:
    """Resuming mixes records of two runs: refuse if any was made with other library versions."""
    now = paths.record_versions()
    for r in records:
        for name, version in (r.get("versions") or {}).items():
            if name in now and version != now[name]:
                raise UsageError(f"--resume: {where} was written with {name} {version}, but {name} "
                                 f"{now[name]} is installed; run without --resume to start afresh")


def execute_tasks(tasks: list[Task], on_record: Callable[[Record], None], *, jobs: int | None,
                  timeout: float = DEFAULT_TIMEOUT, path_names: Iterable[str] | None = None,
                  max_memory: float | None = None, cache: ArtifactCache | None = None,
                  executor: str = "local", address: str | None = None, policy: Policy | None = None,
                  module_digests: dict[str, str] | None = None) -> None:
    """Hand each task's record to `on_record`: in this process (jobs 0, no memory limit) or on warm
    workers, each limited to `max_memory` GB (default: default_max_memory_gb(jobs)). `module_digests`
    ({structure key: digest}, from the preflight) lets the runner see which module cases' artifacts the
    cache holds."""
    if not tasks:
        return
    if jobs == 0:
        import warnings

        executor = Executor(cache, policy=policy)
        with library_caches(cache), warnings.catch_warnings():  # Inductor's own caches under ours
            warnings.simplefilter("ignore")  # library deprecation chatter is not a finding
            for t in tasks:
                on_record(executor.execute(t.spec, t.path))
        return
    names = sorted(set(path_names) if path_names is not None else {t.path for t in tasks})
    if executor == "ray":  # no memory limit: an address-space cap breaks Ray's shared memory
        from harness.engine.ray_executor import RayRunner

        runner = RayRunner(jobs, timeout, names, cache=cache, address=address, policy=policy)
    else:
        if max_memory is None:
            max_memory = default_max_memory_gb(jobs)
        runner = Runner(jobs, timeout, names, max_memory=max_memory, cache=cache, policy=policy)
    runner.module_digests = dict(module_digests or {})
    runner.run(tasks, on_record)


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (a CI cancel) stops the run like Ctrl-C does."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _trim_torn_line(path: str) -> None:
    """Drop a partial last line left by a killed writer, so appends start clean."""
    with open(path, "rb+") as fh:
        data = fh.read()
        if data and not data.endswith(b"\n"):
            fh.truncate(data.rfind(b"\n") + 1)
