"""The scheduler: groups largest-first on warm workers, and work stealing from long groups."""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Callable, Iterable

from harness.core.verdicts import DEFAULT_TIMEOUT
from harness.engine.plan import Group, Task, group_tasks
from harness.engine.procs import Procs, Worker

MIN_STEAL_GAIN = 0.5  # seconds a split must save before a group's tail moves to an idle worker


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
                 start_method: str = "forkserver", max_memory: float | None = None, cache=None):
        self.jobs = max(1, jobs)
        self.max_memory = max_memory  # GB per worker (None: unbounded)
        self.cache = cache  # the persistent ArtifactCache, or None
        self.timeout = timeout
        self.path_names = sorted(set(path_names))
        self.start_method = start_method
        self.estimates = _Estimates()
        self.workers: list[Worker] = []
        self.pending: list[Group] = []

    def run(self, tasks: list[Task], on_record: Callable[[dict], None]) -> None:
        self.pending = group_tasks(tasks)
        if not self.pending:
            return
        names = self.path_names or sorted({t.path for t in tasks})
        self.procs = Procs(names, self.timeout, self.start_method, self.max_memory,
                           cache=self.cache.config() if self.cache else None)
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

    def _assign(self, w: Worker) -> None:
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

    def _service(self, i: int, w: Worker, on_record) -> None:
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
