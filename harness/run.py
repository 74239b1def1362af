"""The runner: cases × paths through warm, isolated worker processes.

Executions are grouped by (path, structure key); a group runs on one worker
so its compiled artifact is reused. A worker that dies costs one `crash`
record, one past the timeout one `timeout` record; a fresh worker takes over.
Each record is appended and flushed to results.jsonl as it arrives, so a
killed run can be resumed. `jobs=0` runs in this process (no isolation), for
quick scripts and debugging.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Callable, Iterable

from harness.execute import Executor, base_record
from harness.results import ResultsWriter, read_results
from harness.spec import CaseSpec

DEFAULT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Task:
    spec: CaseSpec
    path: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.spec.case_id, self.path)


def shard(specs: list[CaseSpec], k: int, n: int) -> list[CaseSpec]:
    """Part k (1-based) of n: every n-th spec in case_id order, so parts differ by at most one."""
    ordered = sorted(specs, key=lambda s: s.case_id)
    return [s for i, s in enumerate(ordered) if i % n == k - 1]


def plan(specs: Iterable[CaseSpec], path_names: list[str]) -> list[Task]:
    return [Task(s, p) for s in specs for p in path_names]


def group_tasks(tasks: list[Task]) -> list[list[Task]]:
    """Tasks grouped by (path, structure key), in first-seen order."""
    from harness import paths

    groups: dict[tuple[str, str], list[Task]] = {}
    for t in tasks:
        try:
            skey = paths.get(t.path).structure_key(t.spec)
        except Exception:  # noqa: BLE001 - an unknown path still gets its record
            skey = t.spec.structure_key()
        groups.setdefault((t.path, skey), []).append(t)
    return list(groups.values())


# -- the worker process ---------------------------------------------------

def _worker_main(conn, preload: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    import warnings

    warnings.filterwarnings("ignore")  # library deprecation chatter is not a finding
    from harness import paths

    for name in preload:  # pay the imports once, while idle
        try:
            paths.get(name)
        except Exception:  # noqa: BLE001
            pass
    executor = Executor()
    conn.send(("ready", None))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        spec_dict, path = msg
        conn.send(("record", executor.execute(spec_dict, path)))


@dataclass
class _Worker:
    process: mp.Process
    conn: object
    ready: bool = False
    task: Task | None = None
    started: float = 0.0
    queue: deque = field(default_factory=deque)


def _signal_name(code: int | None) -> str:
    if code is None:
        return "unknown"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class Runner:
    """Runs tasks on `jobs` warm workers and hands each record to `on_record`."""

    def __init__(self, jobs: int, timeout: float, preload: list[str]):
        self.jobs = max(1, jobs)
        self.timeout = timeout
        self.preload = preload
        self.ctx = mp.get_context("spawn")
        self.workers: list[_Worker] = []
        self.failed_starts = 0

    def _start(self) -> _Worker:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker_main, args=(child, self.preload), daemon=True)
        proc.start()
        child.close()
        return _Worker(proc, parent)

    def _kill(self, w: _Worker) -> None:
        if w.process.is_alive():
            w.process.kill()
        w.process.join(5)
        try:
            w.conn.close()
        except OSError:
            pass

    def run(self, tasks: list[Task], on_record: Callable[[dict], None]) -> None:
        pending: deque[list[Task]] = deque(group_tasks(tasks))
        self.workers = [self._start() for _ in range(min(self.jobs, max(1, len(pending))))]
        try:
            while pending or any(w.task or w.queue for w in self.workers):
                for w in self.workers:
                    if w.ready and w.task is None:
                        if not w.queue and pending:
                            w.queue.extend(pending.popleft())
                        if w.queue:
                            w.task = w.queue.popleft()
                            w.started = time.monotonic()
                            w.conn.send((w.task.spec.to_dict(), w.task.path))
                busy = [w for w in self.workers if w.task is not None]
                deadline = min((w.started + self.timeout for w in busy), default=time.monotonic() + 1)
                conns = [w.conn for w in self.workers] + [w.process.sentinel for w in self.workers]
                wait(conns, timeout=max(0.0, min(1.0, deadline - time.monotonic())))
                for i, w in enumerate(list(self.workers)):
                    self._service(i, w, on_record, pending)
        finally:
            self.close()

    def _service(self, i: int, w: _Worker, on_record, pending) -> None:
        try:
            while w.conn.poll():
                kind, payload = w.conn.recv()
                if kind == "ready":
                    w.ready = True
                elif kind == "record":
                    on_record(payload)
                    w.task = None
                    return
        except (EOFError, OSError):
            pass
        if not w.process.is_alive():
            code = w.process.exitcode
            if not w.ready:
                self.failed_starts += 1
                if self.failed_starts > 3:
                    raise RuntimeError(f"worker processes fail to start ({_signal_name(code)})")
            if w.task is not None:
                on_record(_failure(w.task, "crash", f"worker died ({_signal_name(code)})",
                                   signal=_signal_name(code), seconds=time.monotonic() - w.started))
            self._replace(i, w, pending)
        elif w.task is not None and time.monotonic() - w.started > self.timeout:
            on_record(_failure(w.task, "timeout", f"no result after {self.timeout:g} s",
                               seconds=time.monotonic() - w.started))
            self._kill(w)
            self._replace(i, w, pending)

    def _replace(self, i: int, w: _Worker, pending) -> None:
        self._kill(w)
        if w.queue:
            pending.appendleft(list(w.queue))
        self.workers[i] = self._start()

    def close(self) -> None:
        for w in self.workers:
            try:
                w.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        for w in self.workers:
            w.process.join(2)
            self._kill(w)
        self.workers = []


def _failure(task: Task, verdict: str, message: str, seconds: float, **extra) -> dict:
    record = base_record(task.spec, task.path)
    record.update(verdict=verdict, message=message, seconds=round(seconds, 6), **extra)
    return record


class Progress:
    """A tqdm bar on a terminal, else a line every few percent on stderr."""

    def __init__(self, total: int, enabled: bool = True):
        self.total = total
        self.done = 0
        self.failing = 0
        self.start = time.monotonic()
        self.enabled = enabled and total > 0
        self.bar = None
        self._next_pct = 5
        if self.enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="exec", dynamic_ncols=True, file=sys.stderr)

    def update(self, record: dict) -> None:
        self.done += 1
        if record.get("verdict") != "pass":
            self.failing += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix(failing=self.failing, refresh=False)
            self.bar.update(1)
            return
        pct = 100 * self.done / self.total
        if pct >= self._next_pct or self.done == self.total:
            elapsed = time.monotonic() - self.start
            rate = self.done / elapsed if elapsed else 0.0
            left = (self.total - self.done) / rate if rate else 0.0
            print(f"normdiff: {self.done}/{self.total} ({pct:.0f}%), {self.failing} failing, "
                  f"{rate:.2f} exec/s, ~{left:.0f} s left", file=sys.stderr, flush=True)
            while self._next_pct <= pct:
                self._next_pct += 5

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(specs: list[CaseSpec], path_names: list[str], out_dir: str, *, jobs: int | None = None,
        timeout: float = DEFAULT_TIMEOUT, resume: bool = False, progress: bool = True) -> list[dict]:
    """Run specs × paths, appending records to out_dir/results.jsonl; return this run's records.

    With `resume`, executions already recorded in results.jsonl are skipped
    and the file is appended to; otherwise it is started afresh.
    """
    os.makedirs(out_dir, exist_ok=True)
    results_path = os.path.join(out_dir, "results.jsonl")
    tasks = plan(specs, path_names)
    if resume and os.path.exists(results_path):
        done = {(r["case_id"], r["path"]) for r in read_results(results_path)}
        tasks = [t for t in tasks if t.key not in done]
        _trim_torn_line(results_path)
    elif os.path.exists(results_path):
        os.remove(results_path)
    if jobs is None:
        jobs = os.cpu_count() or 1
    records: list[dict] = []
    bar = Progress(len(tasks), progress)
    with ResultsWriter(results_path) as writer:
        def on_record(record: dict) -> None:
            writer.write(record)
            records.append(record)
            bar.update(record)

        try:
            if jobs == 0:
                executor = Executor()
                for t in tasks:
                    on_record(executor.execute(t.spec, t.path))
            else:
                Runner(jobs, timeout, sorted(set(path_names))).run(tasks, on_record)
        finally:
            bar.close()
    return records


def _trim_torn_line(path: str) -> None:
    """Drop a partial last line left by a killed writer, so appends start clean."""
    with open(path, "rb+") as fh:
        data = fh.read()
        if data and not data.endswith(b"\n"):
            fh.truncate(data.rfind(b"\n") + 1)
