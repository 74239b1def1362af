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
import multiprocessing as mp
import os
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
from typing import Callable, Iterable

from harness.engine.execute import Executor, base_record
from harness.core.records import ResultsWriter, read_results
from harness.core.spec import CaseSpec

DEFAULT_TIMEOUT = 300.0
START_TIMEOUT = 600.0  # a worker that is not ready by then is hung in its imports
START_FAILURES = 3  # consecutive workers dying before ready: the environment is broken
LOG_TAIL_BYTES = 4000
MIN_STEAL_GAIN = 0.5  # seconds a split must save before a group's tail moves to an idle worker

# What a path's packages need imported to be warm (the heavy parts are lazy
# imports inside the path modules). A path may add `warm_imports`.
WARM_IMPORTS = {
    "torch": ("torch", "torch.export"),
    "apache-tvm": ("tvm", "tvm.relax", "tvm.relax.frontend.torch"),
    "executorch": ("executorch.exir", "executorch.runtime"),
}
HARNESS_IMPORTS = ("harness.engine.execute", "harness.oracle.reference", "harness.oracle.compare",
                   "harness.oracle.inputs", "harness.oracle.modules")


class RunnerError(RuntimeError):
    """The run cannot go on (workers cannot even start)."""


@dataclass(frozen=True)
class Task:
    spec: CaseSpec
    path: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.spec.case_id, self.path)


# -- planning ---------------------------------------------------------------

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
    """Tasks sharing one prepared artifact, still to be run."""

    path: str
    structure: str
    tasks: deque


def structure_of(task: Task) -> str:
    """The key of the artifact `task` needs: its path's structure key for its spec."""
    from harness import paths

    try:
        return paths.get(task.path).structure_key(task.spec)
    except Exception:  # noqa: BLE001 - an unknown path still gets its record, from the worker
        return task.spec.structure_key()


def group_tasks(tasks: list[Task]) -> list[Group]:
    """Tasks grouped by (path, structure key), in first-seen order."""
    groups: dict[tuple[str, str], Group] = {}
    for t in tasks:
        skey = structure_of(t)
        groups.setdefault((t.path, skey), Group(t.path, skey, deque())).tasks.append(t)
    return list(groups.values())


def warm_modules(path_names: list[str]) -> list[str]:
    """Modules to import before forking workers for these paths."""
    from harness import paths

    mods = list(HARNESS_IMPORTS)
    table = {**paths.REGISTRY, **paths._extra()}
    for name in path_names:
        if name not in table:
            continue
        mods.append(table[name].split(":")[0])
        try:
            path = paths.get(name)
        except Exception:  # noqa: BLE001 - the worker will record the failure
            continue
        for pkg in getattr(path, "packages", ()):
            mods += WARM_IMPORTS.get(pkg, ())
        mods += list(getattr(path, "warm_imports", ()))
    return list(dict.fromkeys(mods))


def warm(modules: Iterable[str]) -> None:
    """Import `modules`, ignoring failures (the execution will report them) and their chatter."""
    import importlib
    import warnings

    with _quiet_fds(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in modules:
            try:
                importlib.import_module(name)
            except BaseException:  # noqa: BLE001 - an import must not kill a warm process
                pass


@contextlib.contextmanager
def _quiet_fds():
    """Send fds 1 and 2 to /dev/null for a while (C libraries print at import)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


# The forkserver imports harness.engine.run first; with this variable set it warms up.
_WARM_ENV = "NORMDIFF_WARM_IMPORTS"
if os.environ.get(_WARM_ENV) and mp.parent_process() is None and __name__ == "harness.engine.run":
    _mods = os.environ.pop(_WARM_ENV).split(",")
    warm(_mods)


# -- the worker process -----------------------------------------------------

def _worker_main(conn, cfg: dict) -> None:
    """Serve tasks until told to stop, keeping prepared artifacts until told to drop them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    sys.path.extend(p for p in cfg["sys_path"] if p not in sys.path)  # e.g. a test's path module
    if cfg["extra_paths"]:
        os.environ["NORMDIFF_EXTRA_PATHS"] = cfg["extra_paths"]
    else:
        os.environ.pop("NORMDIFF_EXTRA_PATHS", None)
    log = os.open(cfg["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    import faulthandler
    import warnings

    faulthandler.enable(file=sys.stderr, all_threads=False)  # a crash leaves its stack in the log
    warnings.filterwarnings("ignore")  # library deprecation chatter is not a finding
    _watch_parent(os.getppid())
    warm(cfg["warm"])  # no-op when forked from the warm forkserver
    if cfg.get("threads"):  # jobs share the cores; one thread each also keeps sums in one order
        import torch

        torch.set_num_threads(cfg["threads"])
        os.environ["TVM_NUM_THREADS"] = str(cfg["threads"])
    executor = Executor()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        reset, spec_dict, path = msg
        conn.send(("started", None))
        if reset:  # a new group: drop the artifacts of the previous ones
            executor = Executor()
        try:
            record = executor.execute(spec_dict, path)
        except Exception as exc:  # noqa: BLE001 - a harness bug is still one record
            from harness.paths.base import first_line

            record = base_record(CaseSpec.from_dict(spec_dict), path)
            record.update(verdict="error", stage="run", message=f"harness: {first_line(exc)}")
        conn.send(("record", record))


def _watch_parent(ppid: int) -> None:
    """Exit when the process that started us is gone (the run was killed)."""
    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != ppid:
                os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


# -- worker processes, seen from the parent -------------------------------

@dataclass
class _Worker:
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


def _signal_name(code: int | None) -> str:
    if code is None:
        return "unknown"
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class _Procs:
    """Starts, feeds, watches and stops worker processes; turns deaths and hangs into records."""

    def __init__(self, path_names: Iterable[str], timeout: float, start_method: str = "forkserver"):
        self.timeout = timeout
        self.warm = warm_modules(sorted(set(path_names)))
        self.start_method = start_method
        self.ctx = None
        self.failed_starts = 0
        self.requeued: dict[tuple[str, str], int] = defaultdict(int)
        self.logdir = tempfile.mkdtemp(prefix="normdiff-workers-")
        self.count = 0

    def _context(self):
        if self.ctx is None:
            if self.start_method == "forkserver":
                self.ctx = mp.get_context("forkserver")
                self.ctx.set_forkserver_preload(["harness.engine.run"])
                _start_forkserver(self.warm)
            else:
                self.ctx = mp.get_context(self.start_method)
        return self.ctx

    def start(self) -> _Worker:
        self.count += 1
        log = os.path.join(self.logdir, f"worker-{self.count}.log")
        cfg = {"extra_paths": os.environ.get("NORMDIFF_EXTRA_PATHS", ""), "log": log,
               "sys_path": list(sys.path), "warm": self.warm, "threads": 1}
        for attempt in range(2):
            ctx = self._context()
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker_main, args=(child, cfg), daemon=True)
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
        return _Worker(proc, parent, log, time.monotonic())

    def send(self, w: _Worker, task: Task, reset: bool) -> bool:
        """Hand `task` to idle worker `w`; False if it is already gone (the caller keeps the task)."""
        w.task, w.acked, w.started, w.log_offset = task, False, time.monotonic(), _size(w.log)
        try:
            w.conn.send((reset, task.spec.to_dict(), task.path))
            return True
        except (OSError, ValueError):
            w.task = None
            return False

    def wait(self, workers: list[_Worker]) -> None:
        """Until a worker says something or dies, a task's time is up, or a second has passed."""
        now = time.monotonic()
        deadline = min((w.started + self.timeout for w in workers if w.task is not None), default=now + 1.0)
        objs = [w.conn for w in workers] + [w.process.sentinel for w in workers]
        wait(objs, timeout=max(0.0, min(1.0, deadline - now)))

    def check(self, w: _Worker) -> tuple[str, object]:
        """What became of `w`: ("record", r), ("failed", r) for a crash or timeout, ("requeue", task)
        for a task it died without seeing, ("dead", None), or ("", None). After anything but
        "record" and "" the worker is gone and must be replaced."""
        try:
            while w.conn.poll():
                kind, payload = w.conn.recv()
                if kind == "ready":
                    w.ready = True
                    self.failed_starts = 0
                elif kind == "started":
                    w.acked = True
                elif kind == "record":
                    w.task = None
                    return "record", payload
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
            return "failed", _failure(task, "crash", f"worker died ({_signal_name(code)})" + _crash_summary(tail),
                                      now - w.started, signal=_signal_name(code), log_tail=tail[-20:])
        if w.task is not None and now - w.started > self.timeout:
            self.kill(w)
            task, w.task = w.task, None
            return "failed", _failure(task, "timeout", f"no result after {self.timeout:g} s", now - w.started)
        if not w.ready and now - w.born > START_TIMEOUT:
            self.kill(w)
            self.failed_starts += 1
            if self.failed_starts >= START_FAILURES:
                raise RunnerError(f"worker processes hang in their imports for {START_TIMEOUT:g} s")
            return "dead", None
        return "", None

    def kill(self, w: _Worker) -> None:
        with contextlib.suppress(Exception):
            if w.process.is_alive():
                w.process.kill()
            w.process.join(5)
        with contextlib.suppress(OSError):
            w.conn.close()

    def close(self, workers: list[_Worker], graceful: bool = True) -> None:
        """Stop `workers`: politely after finished work, at once after Ctrl-C or an error."""
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


class _Estimates:
    """Per-path prepare and execution seconds, learnt from the records so far."""

    def __init__(self):
        self.prep: dict[str, list[float]] = defaultdict(list)
        self.exec: dict[str, list[float]] = defaultdict(list)

    def add(self, r: dict) -> None:
        if r.get("verdict") in ("crash", "timeout"):
            return
        prep = r.get("prepare_seconds") or 0.0
        if not r.get("cache_hit"):
            self.prep[r["path"]].append(prep)
        self.exec[r["path"]].append(max(0.0, (r.get("seconds") or 0.0) - prep))

    def known(self, path: str) -> bool:
        return bool(self.prep[path]) and bool(self.exec[path])

    def prepare(self, path: str) -> float:
        vals = self.prep.get(path) or [v for vs in self.prep.values() for v in vs] or [1.0]
        return sum(vals) / len(vals)

    def execution(self, path: str) -> float:
        vals = self.exec.get(path) or [v for vs in self.exec.values() for v in vs] or [0.05]
        return max(1e-4, sum(vals) / len(vals))

    def group(self, g: Group) -> float:
        return self.prepare(g.path) + len(g.tasks) * self.execution(g.path)


# -- a whole run ----------------------------------------------------------------

class Runner:
    """Runs a list of tasks on `jobs` warm workers, a group at a time, handing each record to `on_record`."""

    def __init__(self, jobs: int, timeout: float = DEFAULT_TIMEOUT, path_names: Iterable[str] = (),
                 start_method: str = "forkserver"):
        self.jobs = max(1, jobs)
        self.timeout = timeout
        self.path_names = sorted(set(path_names))
        self.start_method = start_method
        self.estimates = _Estimates()
        self.workers: list[_Worker] = []
        self.pending: list[Group] = []

    def run(self, tasks: list[Task], on_record: Callable[[dict], None]) -> None:
        self.pending = group_tasks(tasks)
        if not self.pending:
            return
        names = self.path_names or sorted({t.path for t in tasks})
        self.procs = _Procs(names, self.timeout, self.start_method)
        graceful = False
        try:
            # As many workers as tasks allow: an idle one may take the tail of a long group.
            self.workers = []
            for _ in range(min(self.jobs, len(tasks))):
                self.workers.append(self.procs.start())
            while self.pending or any(w.task or (w.group and w.group.tasks) for w in self.workers):
                for w in self.workers:
                    if w.ready and w.task is None:
                        self._assign(w)
                self.procs.wait(self.workers)
                for i, w in enumerate(self.workers):
                    self._service(i, w, on_record)
            graceful = True
        finally:
            self.procs.close(self.workers, graceful)
            self.workers = []

    def _assign(self, w: _Worker) -> None:
        reset = False
        if w.group is None or not w.group.tasks:
            w.group, reset = self._next_group(), True
        if w.group is None:
            return
        task = w.group.tasks.popleft()
        if not self.procs.send(w, task, reset):  # gone between tasks: the service loop replaces it
            w.group.tasks.appendleft(task)

    def _next_group(self) -> Group | None:
        """The pending group with the most estimated work, else the tail of a long running one."""
        if self.pending:
            best = max(range(len(self.pending)), key=lambda i: (self.estimates.group(self.pending[i]), -i))
            return self.pending.pop(best)
        return self._steal()

    def _steal(self) -> Group | None:
        """Split the running group with the most work left, if that ends it MIN_STEAL_GAIN sooner."""
        best, best_take, best_left = None, 0, 0.0
        for v in self.workers:
            g = v.group
            if g is None or len(g.tasks) < 2 or not self.estimates.known(g.path):
                continue
            p, e = self.estimates.prepare(g.path), self.estimates.execution(g.path)
            # Split so both finish together: the thief pays the compile p again,
            # and the group ends take * e sooner than on its own.
            take = min(len(g.tasks) - 1, int((len(g.tasks) * e - p) / (2 * e)))
            left = len(g.tasks) * e
            if take >= 1 and take * e >= MIN_STEAL_GAIN and (best is None or left > best_left):
                best, best_take, best_left = g, take, left
        if best is None:
            return None
        tail = deque(best.tasks.pop() for _ in range(best_take))
        tail.reverse()
        return Group(best.path, best.structure, tail)

    def _service(self, i: int, w: _Worker, on_record) -> None:
        kind, payload = self.procs.check(w)
        if kind == "record":
            self.estimates.add(payload)
            on_record(payload)
            return
        if not kind:
            return
        if kind == "failed":
            on_record(payload)
        elif kind == "requeue":
            w.group.tasks.appendleft(payload)
        if w.group is not None and w.group.tasks:
            self.pending.insert(0, w.group)  # the rest of its group continues on a new worker
        self.workers[i] = self.procs.start()


# -- a few executions at a time -----------------------------------------------------

class Pool:
    """Warm, isolated workers for callers that ask for a few executions at a time (fuzz, the pytest plugin).

    One worker per path ("lane"), so everything a path is asked goes to the
    same process and reuses its artifacts while only the input changes; it
    drops them after `keep` structures, to bound memory. A crash or a hang is a
    `crash` or `timeout` record and the lane gets a fresh worker.
    """

    def __init__(self, path_names: Iterable[str], timeout: float = DEFAULT_TIMEOUT,
                 start_method: str = "forkserver", keep: int = 32):
        self.path_names = list(dict.fromkeys(path_names))
        self.timeout = timeout
        self.start_method = start_method
        self.keep = keep
        self.procs: _Procs | None = None
        self.lanes: dict[str, _Worker] = {}

    def __enter__(self) -> "Pool":
        self.procs = _Procs(self.path_names, self.timeout, self.start_method)
        try:
            for name in self.path_names:
                self.lanes[name] = self.procs.start()
        except BaseException:
            self.close(graceful=False)
            raise
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(graceful=exc_type is None)

    def close(self, graceful: bool = True) -> None:
        if self.procs is not None:
            self.procs.close(list(self.lanes.values()), graceful)
        self.procs, self.lanes = None, {}

    def submit(self, spec: CaseSpec | dict, path: str) -> dict:
        """The record of one execution."""
        return self.map([Task(CaseSpec.from_dict(spec), path)])[0]

    def map(self, tasks: list[Task]) -> list[dict]:
        """The records of `tasks`, in their order; different paths run at the same time."""
        if self.procs is None:
            raise RunnerError("the worker pool is closed (outside its `with` block, or stopped by an error)")
        queues: dict[str, deque] = defaultdict(deque)
        for i, t in enumerate(tasks):
            queues[t.path].append((i, t))
            if t.path not in self.lanes:
                self.lanes[t.path] = self.procs.start()
        out: list[dict | None] = [None] * len(tasks)
        left = len(tasks)
        try:
            while left:
                for name, w in self.lanes.items():
                    if w.ready and w.task is None and queues[name]:
                        self._send(w, *queues[name].popleft(), queues[name])
                self.procs.wait(list(self.lanes.values()))
                for name, w in list(self.lanes.items()):
                    kind, payload = self.procs.check(w)
                    if kind in ("record", "failed"):
                        out[w.tag] = payload
                        left -= 1
                    elif kind == "requeue":
                        queues[name].appendleft((w.tag, payload))
                    if kind not in ("record", ""):
                        self.lanes[name] = self.procs.start()
        except BaseException:
            self.close(graceful=False)  # a worker may be mid-task: the pool cannot be reused
            raise
        return out

    def _send(self, w: _Worker, index: int, task: Task, queue: deque) -> None:
        key = structure_of(task)
        reset = key not in w.structures and len(w.structures) >= self.keep
        if reset:
            w.structures.clear()
        w.structures.add(key)
        w.tag = index
        if not self.procs.send(w, task, reset):
            queue.appendleft((index, task))


def _start_forkserver(modules: list[str]) -> None:
    """Start the forkserver with `modules` imported in it and Ctrl-C ignored by it and its children."""
    from multiprocessing import forkserver

    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    os.environ[_WARM_ENV] = ",".join(modules)
    try:
        forkserver.ensure_running()
    finally:
        os.environ.pop(_WARM_ENV, None)
        if main:
            signal.signal(signal.SIGINT, old)


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


def _failure(task: Task, verdict: str, message: str, seconds: float, **extra) -> dict:
    record = base_record(task.spec, task.path)
    record.update(verdict=verdict, message=message, seconds=round(seconds, 6), **extra)
    return record


# -- progress -----------------------------------------------------------------

class Progress:
    """A tqdm bar on a terminal (done, failing, rate, time left), else a line every 5 %."""

    def __init__(self, total: int, enabled: bool = True, stream=None, step: int = 5):
        self.total = total
        self.done = 0
        self.failing = 0
        self.start = time.monotonic()
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.bar = None
        self.step = step
        self._next_pct = step
        if self.enabled and _sized_terminal(self.stream):
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="exec", dynamic_ncols=True, file=self.stream)

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
                  f"{rate:.2f} exec/s, ~{left:.0f} s left", file=self.stream, flush=True)
            while self._next_pct <= pct:
                self._next_pct += self.step

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _sized_terminal(stream) -> bool:
    """Whether `stream` is a terminal with a size (a pseudo-terminal without one shows no tqdm bar)."""
    try:
        return stream.isatty() and min(os.get_terminal_size(stream.fileno())) > 0
    except (AttributeError, OSError, ValueError):
        return False


# -- the entry point ----------------------------------------------------------

def run(specs: list[CaseSpec], path_names: list[str], out_dir: str, *, jobs: int | None = None,
        timeout: float = DEFAULT_TIMEOUT, resume: bool = False, progress: bool = True) -> list[dict]:
    """Run specs × paths, appending records to out_dir/results.jsonl; return this run's records.

    With `resume`, executions already recorded in results.jsonl are skipped
    and the file is appended to; otherwise it is started afresh. Ctrl-C or
    SIGTERM raises KeyboardInterrupt after the workers are stopped; every
    record written so far stays.
    """
    os.makedirs(out_dir, exist_ok=True)
    results_path = os.path.join(out_dir, "results.jsonl")
    tasks = plan(specs, path_names)
    if resume and os.path.exists(results_path):
        _trim_torn_line(results_path)
        done = {(r["case_id"], r["path"]) for r in read_results(results_path)}
        tasks = [t for t in tasks if t.key not in done]
    elif os.path.exists(results_path):
        os.remove(results_path)
    if jobs is None:
        jobs = os.cpu_count() or 1
    records: list[dict] = []
    bar = Progress(len(tasks), progress)
    with ResultsWriter(results_path) as writer, _sigterm_as_interrupt():
        def on_record(record: dict) -> None:
            writer.write(record)
            records.append(record)
            bar.update(record)

        try:
            execute_tasks(tasks, on_record, jobs=jobs, timeout=timeout, path_names=path_names)
        finally:
            bar.close()
    return records


def execute_tasks(tasks: list[Task], on_record: Callable[[dict], None], *, jobs: int,
                  timeout: float = DEFAULT_TIMEOUT, path_names: Iterable[str] | None = None) -> None:
    """Hand each task's record to `on_record`: in this process (jobs 0) or on warm workers."""
    if not tasks:
        return
    if jobs == 0:
        import warnings

        executor = Executor()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # library deprecation chatter is not a finding
            for t in tasks:
                on_record(executor.execute(t.spec, t.path))
        return
    names = sorted(set(path_names) if path_names is not None else {t.path for t in tasks})
    Runner(jobs, timeout, names).run(tasks, on_record)


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
