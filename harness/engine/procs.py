"""Worker processes seen from the parent: start, feed, watch, stop; deaths and hangs become records."""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Iterable

from harness.core.captured import CAPTURED_ENV
from harness.core.memory import OUT_OF_MEMORY, memory_note
from harness.core.verdicts import Verdict
from harness.engine.execute import failed
from harness.engine.messages import Done, Ready, Started, TaskMessage, WorkerConfig
from harness.engine.plan import Group, Task
from harness.engine.warm import retire_forkserver, start_forkserver, warm_modules
from harness.engine.worker import worker_main

START_TIMEOUT = 600.0  # a worker that is not ready by then is hung in its imports
START_FAILURES = 3  # consecutive workers dying before ready: the environment is broken
LOG_TAIL_BYTES = 4000


class RunnerError(RuntimeError):
    """The run cannot go on (workers cannot even start)."""


@dataclass
class Worker:
    process: object
    conn: object
    log: str
    born: float
    ready: bool = False
    task: Task | None = None
    acked: bool = False
    started: float = 0.0
    log_offset: int = 0
    group: Group | None = None  # Runner: the group it works through
    tag: object = None  # Pool: where the record goes
    structures: set = field(default_factory=set)  # Pool: artifacts it holds
    last_structure: str = ""  # Runner: the group structure key of its last task (its export is still held)
    paths: frozenset | None = None  # a bridge: the only paths it imported for (None: every path)
    queued: deque = field(default_factory=deque)  # tasks sent behind `task`, not started yet (Procs.lookahead)


def _signal_name(code: int | None) -> str:
    if code is None:
        return "unknown"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class Procs:
    """Starts, feeds, watches and stops worker processes; turns deaths and hangs into records."""

    # Tasks a busy worker may hold behind its current one, waiting in its pipe: it starts the next as soon
    # as it sends a record, not after this process has read the record and answered: when
    # executions take milliseconds, that round trip would idle the workers (docs/measurements.md).
    lookahead = 1

    def __init__(self, path_names: Iterable[str], timeout: float, start_method: str = "forkserver",
                 max_memory: float | None = None, cache: dict | None = None, fork_server: bool = False,
                 policy: dict | None = None, compiling: Iterable[str] | None = None):
        self.timeout = timeout
        self.fork_server = fork_server  # the forkserver is forked from this process (see start_forkserver)
        self.cache = cache  # ArtifactCache.config() for the workers, None: no persistent cache
        self.policy = policy  # the attribution Policy.config() for the workers, None: attribute every failure
        self.max_memory = int(max_memory * 2**30) if max_memory else None  # bytes per worker, None: unbounded
        self.path_names = sorted(set(path_names))
        self.compiling = None if compiling is None else sorted(set(compiling))  # paths with compiles to do
        self.warm = warm_modules(self.path_names, self.compiling)
        self.start_method = start_method
        if start_method == "forkserver":
            retire_forkserver(self.warm)  # before anything forks: one warmed for other modules is not reused
        self.ctx = None
        self.failed_starts = 0
        self.requeued: dict[tuple[str, str], int] = defaultdict(int)
        self.logdir = tempfile.mkdtemp(prefix="normdiff-workers-")
        self.count = 0
        self.lock = threading.Lock()
        self.arrivals: queue.Queue = queue.Queue()
        self.launchers: list[threading.Thread] = []
        self.closing = False
        # The launch thread writes a byte here as each worker arrives, so wait() returns at once
        # (not when another worker happens to speak, or a second later).
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def _context(self):
        if self.ctx is None:
            if self.start_method == "forkserver":
                self.ctx = mp.get_context("forkserver")
                self.ctx.set_forkserver_preload(["harness.engine.warm"])
                start_forkserver(self.warm, fork=self.fork_server, env=self._library_env())
            else:
                self.ctx = mp.get_context(self.start_method)
        return self.ctx

    def _library_env(self) -> dict[str, str]:
        """The libraries' cache environment the workers will set (harness.engine.cache), for the forkserver's
        warm-ups too: Inductor's probe of the CPU's vector ISA compiles test programs into Inductor's cache
        folder (seconds into an empty one, far less when they are there), which is then the run's
        cache, kept with it from night to night, not torch's default under /tmp."""
        from harness.engine.cache import ArtifactCache, library_cache_env

        return library_cache_env(ArtifactCache.from_config(self.cache))

    @property
    def bridges(self) -> bool:
        """Whether start(only=…) can fork a bridge while the forkserver warms up."""
        return self.start_method == "forkserver"

    def leave_to_bridges(self, families: list[list[str]]) -> None:
        """Before the forkserver starts: it imports only for the paths no bridge runs (and eager, which
        every execution runs for its reference), not a bridge family's own modules a second time. A
        worker that does get such a path (a stolen tail, a dead bridge's group) imports what it needs
        then, as any path does without warm imports."""
        bridged = {p for family in families for p in family}
        rest = [p for p in self.path_names if p not in bridged]
        if rest and self.ctx is None:
            self.warm = warm_modules(sorted(set(rest) | {"eager"}), self.compiling)

    def start(self, only: list[str] | None = None) -> Worker:
        """A fresh worker, forked from the warm forkserver (this waits for its imports).

        With `only`, a bridge: forked from this process at once, importing just
        the modules of those paths, so it works while the forkserver still
        imports everything (the scheduler gives it only those paths).
        """
        with self.lock:
            if self.closing:
                raise RunnerError("the run is stopping")
            self.count += 1
            log = os.path.join(self.logdir, f"worker-{self.count}.log")
        cfg = WorkerConfig(extra_paths=os.environ.get("NORMDIFF_EXTRA_PATHS", ""), sys_path=tuple(sys.path),
                           captured=os.environ.get(CAPTURED_ENV, ""),
                           warm=tuple(warm_modules(only, self.compiling) if only else self.warm), threads=1,
                           cache=self.cache, policy=self.policy, log=log, max_memory=self.max_memory)
        for attempt in range(2):
            ctx = mp.get_context("fork") if only else self._context()
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=worker_main, args=(child, cfg), daemon=True)
            try:
                proc.start()
                break
            except (OSError, EOFError) as exc:  # the forkserver is gone: fall back to spawn
                parent.close()
                child.close()
                if attempt or self.start_method == "spawn":
                    raise RunnerError(f"cannot start a worker process: {exc}") from None
                print(f"normdiff: forkserver failed ({exc}); starting workers with spawn", file=sys.stderr)
                self.start_method, self.ctx = "spawn", None
        child.close()
        return Worker(proc, parent, log, time.monotonic(), paths=frozenset(only) if only else None)

    def launch(self, count: int) -> None:
        """Start `count` forkserver workers from a thread; they arrive on `self.arrivals` (or the error)."""
        self._context()  # the forkserver starts importing now
        if count < 1:
            return

        def starter():
            for _ in range(count):
                try:
                    self.arrivals.put(self.start())
                except BaseException as exc:  # noqa: BLE001 - handed to the scheduler's thread
                    self.arrivals.put(exc)
                    return
                finally:
                    self._wake()

        thread = threading.Thread(target=starter, name="normdiff-launch", daemon=True)
        thread.start()
        self.launchers.append(thread)

    def arrived(self, wait: bool = False, errors: bool = True) -> list[Worker]:
        """The workers launch() has started since the last call (wait: all it will start);
        a failure to start one is raised (with `errors`)."""
        if wait:
            for thread in self.launchers:
                thread.join()
        with contextlib.suppress(OSError):
            os.read(self._wake_r, 4096)  # the wake-ups of what is taken now (-1 after close: nothing)
        out = []
        while not self.arrivals.empty():
            item = self.arrivals.get()
            if isinstance(item, BaseException):
                if errors:
                    raise item
                continue
            out.append(item)
        return out

    def send(self, w: Worker, task: Task, reset: bool) -> bool:
        """Hand `task` to worker `w`: idle, or busy with fewer than `lookahead` queued (then the task waits
        behind the current one); False if it is already gone (the caller keeps the task)."""
        busy = w.task is not None
        if busy:
            w.queued.append(task)
        else:
            w.task, w.acked, w.started, w.log_offset = task, False, time.monotonic(), _size(w.log)
        try:
            w.conn.send(TaskMessage(reset, task.spec.to_dict(), task.path, task.attribute))
            return True
        except (OSError, ValueError):
            if busy:
                w.queued.pop()
            else:
                w.task = None
            return False

    def wait(self, workers: list[Worker]) -> None:
        """Until a worker says something or dies, a task's time is up, or a second has passed."""
        now = time.monotonic()
        deadline = min((w.started + self.timeout for w in workers if w.task is not None), default=now + 1.0)
        objs = [w.conn for w in workers] + [w.process.sentinel for w in workers]
        objs += [self._wake_r] if self._wake_r >= 0 else []
        wait(objs, timeout=max(0.0, min(1.0, deadline - now)))

    def check(self, w: Worker) -> tuple[str, object]:
        """What became of `w`: ("record", r), ("failed", r) for a crash or timeout, ("requeue", task)
        for a task it died without seeing, ("dead", None), or ("", None). After anything but
        "record" and "" the worker is gone and must be replaced, and the tasks still in `w.queued`
        (never started) go back to be run."""
        try:
            while w.conn.poll():
                msg = w.conn.recv()
                if isinstance(msg, Ready):
                    w.ready = True
                    self.failed_starts = 0
                elif isinstance(msg, Started):  # with the log's size as the worker started the task
                    w.acked = True
                    w.log_offset = msg.log_offset
                elif isinstance(msg, Done):
                    w.task = None
                    if w.queued:  # the worker went on to the next at once (its Started gives its log offset)
                        w.task, w.acked, w.started = w.queued.popleft(), False, time.monotonic()
                    return "record", msg.record
        except (EOFError, OSError):
            pass
        now = time.monotonic()
        if not w.process.is_alive():
            code = w.process.exitcode
            self.kill(w)
            if not w.ready:
                self.failed_starts += 1
                if self.failed_starts >= START_FAILURES:
                    raise RunnerError(f"worker processes die before they are ready ({_signal_name(code)})"
                                      + _crash_summary(_log_tail(w.log, 0)))
            task, w.task = w.task, None
            if task is None:
                return "dead", None
            if not w.acked and self.requeued[task.key] < 1:  # it died before it saw the task
                self.requeued[task.key] += 1
                return "requeue", task
            tail = _log_tail(w.log, w.log_offset)
            message = f"worker died ({_signal_name(code)})" + _crash_summary(tail) + self._memory_hint(code, tail)
            return "failed", failed(task.spec, task.path, Verdict.CRASH, message=message, seconds=now - w.started,
                                    signal=_signal_name(code), log_tail=tail[-20:])
        if w.task is not None and now - w.started > self.timeout:
            self.kill(w)
            task, w.task = w.task, None
            return "failed", failed(task.spec, task.path, Verdict.TIMEOUT, message=f"no result after {self.timeout:g} s",
                                    seconds=now - w.started)
        if not w.ready and now - w.born > START_TIMEOUT:
            self.kill(w)
            self.failed_starts += 1
            if self.failed_starts >= START_FAILURES:
                raise RunnerError(f"worker processes hang in their imports for {START_TIMEOUT:g} s")
            return "dead", None
        return "", None

    def _memory_hint(self, code: int | None, tail: list[str]) -> str:
        """A death that looks like a refused allocation (or the kernel's OOM kill) names the limit."""
        if not self.max_memory:
            return ""
        if code == -signal.SIGKILL or any(OUT_OF_MEMORY.search(ln) for ln in tail):
            return f" [likely {memory_note(self.max_memory)}]"
        return ""

    def _wake(self) -> None:
        with self.lock, contextlib.suppress(OSError):  # full: a wake-up is pending anyway
            if self._wake_w >= 0:
                os.write(self._wake_w, b"w")

    def kill(self, w: Worker) -> None:
        with contextlib.suppress(Exception):
            if w.process.is_alive():
                w.process.kill()
            w.process.join(5)
        with contextlib.suppress(OSError):
            w.conn.close()

    def retire(self, w: Worker) -> None:
        """Stop one idle worker (a bridge whose paths are done); the run goes on."""
        with contextlib.suppress(OSError, ValueError):
            w.conn.send(None)
        with contextlib.suppress(Exception):
            w.process.join(5)
        self.kill(w)

    def close(self, workers: list[Worker], graceful: bool = True) -> None:
        """Stop `workers`: politely after finished work, at once after Ctrl-C or an error."""
        self.closing = True  # a worker still being launched is not started (or exits at once)
        if graceful:
            for w in workers:
                with contextlib.suppress(OSError, ValueError):
                    w.conn.send(None)
            deadline = time.monotonic() + 5
            for w in workers:
                with contextlib.suppress(Exception):
                    w.process.join(max(0.0, deadline - time.monotonic()))
        for w in workers:
            self.kill(w)
        shutil.rmtree(self.logdir, ignore_errors=True)
        with self.lock:  # a launch thread may still be writing its wake-up
            for fd in (self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._wake_r = self._wake_w = -1


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _log_tail(path: str, offset: int) -> list[str]:
    """The non-blank lines a worker wrote since `offset` (at most the last few KB)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(offset, size - LOG_TAIL_BYTES))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [ln.rstrip()[:300] for ln in text.splitlines()
            if ln.strip() and not ln.startswith("Extension modules:")]


def _crash_summary(tail: list[str]) -> str:
    """": Fatal Python error: Aborted, in f (file.py:12)" from a faulthandler dump, else its last line."""
    fatal = next((i for i, ln in enumerate(tail) if ln.startswith("Fatal Python error")), None)
    if fatal is None:
        return f": {tail[-1]}" if tail else ""
    where = ""
    for ln in tail[fatal + 1:]:
        m = re.match(r'\s*File "(.+)", line (\d+) in (.+)', ln)
        if m:
            where = f", in {m.group(3)} ({os.path.basename(m.group(1))}:{m.group(2)})"
            break
    return f": {tail[fatal]}{where}"

