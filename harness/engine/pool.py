"""A pool of warm workers, one lane per path, for callers asking a few executions at a time."""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Iterable

from harness.spec import CaseSpec
from harness.core.records import Record
from harness.core.verdicts import DEFAULT_TIMEOUT
from harness.engine.plan import Task, structure_of
from harness.engine.procs import Procs, RunnerError, Worker


class Pool:
    """Warm, isolated workers for callers that ask for a few executions at a time (fuzz, the pytest plugin).

    One worker per path ("lane"), so everything a path is asked goes to the
    same process and reuses its artifacts while only the input changes; it
    drops them after `keep` structures, to bound memory. A crash or a hang is a
    `crash` or `timeout` record and the lane gets a fresh worker.
    """

    def __init__(self, path_names: Iterable[str], timeout: float = DEFAULT_TIMEOUT,
                 start_method: str = "forkserver", keep: int = 32, max_memory: float | None = None):
        self.path_names = list(dict.fromkeys(path_names))
        self.max_memory = max_memory  # GB per worker (None: unbounded)
        self.timeout = timeout
        self.start_method = start_method
        self.keep = keep
        self.procs: Procs | None = None
        self.lanes: dict[str, Worker] = {}

    def __enter__(self) -> "Pool":
        self.procs = Procs(self.path_names, self.timeout, self.start_method, self.max_memory)
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

    def submit(self, spec: CaseSpec | dict, path: str) -> Record:
        """The record of one execution."""
        return self.map([Task(CaseSpec.from_dict(spec), path)])[0]

    def map(self, tasks: list[Task]) -> list[Record]:
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

    def _send(self, w: Worker, index: int, task: Task, queue: deque) -> None:
        key = structure_of(task)
        reset = key not in w.structures and len(w.structures) >= self.keep
        if reset:
            w.structures.clear()
        w.structures.add(key)
        w.tag = index
        if not self.procs.send(w, task, reset):
            queue.appendleft((index, task))
