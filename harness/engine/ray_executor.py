"""`run --executor ray`: the same run on a Ray cluster (docs/contracts.md §5).

Why it is built this way:

* The scheduling is the forkserver runner's (`Runner`: groups of one
  compiled artifact, largest first, the next path of the structure a worker
  just ran, work stealing); only what starts and watches a worker differs.
  Here a worker is a Ray actor holding an `Executor`, so it keeps its
  artifacts (and recent exports) between the tasks of its groups: structure
  affinity is the same as on one machine.
* An actor that dies is one `crash` record (Ray's reason in the message), one
  past the timeout is killed and is one `timeout` record; a fresh actor takes
  the rest of its group. Actors that keep dying before they are ready end
  the run (RunnerError), as workers do.
* Records come back to the driver, which writes results.jsonl as they
  arrive: --resume and --shard work on the task list before any of this.
* `--address` joins a running cluster; without it a local one with `jobs`
  CPUs is started for the run and stopped after it. Actors on other
  machines use the cache folder on their own disk (or a shared one mounted
  at the same place) and need the same normdiff installed.
* Ray is optional (`pip install normdiff[ray]`); nothing imports it unless
  this executor is chosen.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
from dataclasses import dataclass, replace
from typing import Iterable

from harness.core.captured import CAPTURED_ENV
from harness.core.errors import UsageError
from harness.core.records import Record
from harness.core.verdicts import DEFAULT_TIMEOUT, Verdict
from harness.engine.messages import TaskMessage, WorkerConfig
from harness.engine.plan import Task
from harness.engine.procs import START_FAILURES, START_TIMEOUT, RunnerError, Worker
from harness.engine.scheduler import Runner
from harness.engine.warm import warm_modules

EXECUTORS = ("local", "ray")


def available() -> bool:
    """Whether Ray is installed (without importing it)."""
    return importlib.util.find_spec("ray") is not None


def require() -> None:
    """UsageError (one line, exit 2) unless Ray can be imported."""
    try:
        _ray()
    except ImportError as exc:
        raise UsageError(f"--executor ray: Ray cannot be imported here ({exc}); "
                         "install it with pip install 'normdiff[ray]'") from None


def _ray():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the machine
    import ray

    return ray


# -- the actor ----------------------------------------------------------------------

class ExecutorActor:
    """A Ray actor around an Executor: warm imports once, then one task at a time."""

    def __init__(self, cfg: WorkerConfig):
        from harness.engine.worker import warm_executor

        self.executor = warm_executor(cfg)
        self.node = _ray().get_runtime_context().get_node_id()[:12]

    def ready(self) -> int:
        return os.getpid()

    def execute(self, msg: TaskMessage) -> Record:
        from harness.engine.worker import execute_guarded

        if msg.reset:  # a new group: drop the artifacts of the previous ones (recent exports stay)
            self.executor = self.executor.fresh()
        return replace(execute_guarded(self.executor, msg), ray_node=self.node)


# -- actors seen from the driver ----------------------------------------------------

@dataclass
class ActorWorker(Worker):
    ref: object = None  # the ObjectRef of the task in flight
    ready_ref: object = None


class RayProcs:
    """Procs' interface (start, send, wait, check, kill, close) over Ray actors."""

    def __init__(self, path_names: Iterable[str], timeout: float, cache: dict | None, policy: dict | None = None):
        self.ray = _ray()
        self.timeout = timeout
        self.cfg = WorkerConfig(extra_paths=os.environ.get("NORMDIFF_EXTRA_PATHS", ""), sys_path=tuple(sys.path),
                                captured=os.environ.get(CAPTURED_ENV, ""),
                                warm=tuple(warm_modules(sorted(set(path_names)))), threads=1, cache=cache,
                                policy=policy)
        self.actor_class = self.ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(ExecutorActor)
        self.failed_starts = 0

    bridges = False  # actors start without blocking the driver: no bridge workers needed
    lookahead = 0  # one call in flight per actor: the next is sent when its record is back

    def launch(self, count: int) -> None:
        self._arrivals = [self.start() for _ in range(count)]

    def arrived(self, wait: bool = False, errors: bool = True) -> list[ActorWorker]:
        out, self._arrivals = getattr(self, "_arrivals", []), []
        return out

    def start(self, only=None) -> ActorWorker:
        handle = self.actor_class.remote(self.cfg)
        w = ActorWorker(process=handle, conn=None, log="", born=time.monotonic())
        w.ready_ref = handle.ready.remote()
        return w

    def send(self, w: ActorWorker, task: Task, reset: bool) -> bool:
        w.task, w.acked, w.started = task, True, time.monotonic()
        w.ref = w.process.execute.remote(TaskMessage(reset, task.spec.to_dict(), task.path, task.attribute))
        return True

    def wait(self, workers: list[ActorWorker]) -> None:
        now = time.monotonic()
        deadline = min((w.started + self.timeout for w in workers if w.task is not None), default=now + 1.0)
        refs = [w.ref for w in workers if w.ref is not None] + [w.ready_ref for w in workers if not w.ready]
        if refs:
            self.ray.wait(refs, num_returns=1, timeout=max(0.0, min(1.0, deadline - now)))
        else:
            time.sleep(0.05)

    def check(self, w: ActorWorker) -> tuple[str, object]:
        """As Procs.check: ("record", r), ("failed", r), ("dead", None) or ("", None)."""
        ray = self.ray
        now = time.monotonic()
        if not w.ready:
            if ray.wait([w.ready_ref], timeout=0)[0]:
                try:
                    ray.get(w.ready_ref)
                    w.ready, self.failed_starts = True, 0
                except Exception as exc:  # noqa: BLE001 - the actor could not start
                    return self._start_failed(w, _reason(exc))
            elif now - w.born > START_TIMEOUT:
                return self._start_failed(w, f"not ready after {START_TIMEOUT:g} s")
            return "", None
        if w.ref is not None and ray.wait([w.ref], timeout=0)[0]:
            task, ref, w.task, w.ref = w.task, w.ref, None, None
            try:
                return "record", ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - the actor died under the task
                self.kill(w)
                return "failed", _failure(task, Verdict.CRASH, f"Ray actor died ({_reason(exc)})", now - w.started)
        if w.task is not None and now - w.started > self.timeout:
            self.kill(w)
            task, w.task, w.ref = w.task, None, None
            return "failed", _failure(task, Verdict.TIMEOUT, f"no result after {self.timeout:g} s", now - w.started)
        return "", None

    def _start_failed(self, w: ActorWorker, reason: str) -> tuple[str, object]:
        self.kill(w)
        self.failed_starts += 1
        if self.failed_starts >= START_FAILURES:
            raise RunnerError(f"Ray actors die before they are ready ({reason})")
        return "dead", None

    def kill(self, w: ActorWorker) -> None:
        try:
            self.ray.kill(w.process, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    retire = kill

    def close(self, workers: list[ActorWorker], graceful: bool = True) -> None:
        for w in workers:
            self.kill(w)


def _reason(exc: BaseException) -> str:
    """Ray's reason an actor died, on one line."""
    text = " ".join(str(exc).split())
    for marker in ("The actor died", "Worker exit", "exit detail"):
        at = text.find(marker)
        if at >= 0:
            return text[at:at + 300]
    return f"{type(exc).__name__}: {text[:300]}"


def _failure(task: Task, verdict: Verdict, message: str, seconds: float) -> Record:
    from harness.engine.execute import failed

    return failed(task.spec, task.path, verdict, message=message, seconds=seconds)


class RayRunner(Runner):
    """Runner on Ray actors: `address` joins a cluster, else a local one with `jobs` CPUs is started.

    `jobs` None means one actor per CPU of the cluster.
    """

    def __init__(self, jobs: int | None, timeout: float = DEFAULT_TIMEOUT, path_names: Iterable[str] = (),
                 cache=None, address: str | None = None, policy=None):
        super().__init__(jobs or 1, timeout, path_names, cache=cache, policy=policy)
        self.requested_jobs = jobs
        self.address = address

    def _procs(self, names: list[str]) -> RayProcs:
        return RayProcs(names, self.timeout, self.cache.config() if self.cache else None,
                        self.policy.config() if self.policy else None)

    def run(self, tasks: list[Task], on_record) -> None:
        if not tasks:
            return
        ray = _ray()
        started_here = not ray.is_initialized()
        if started_here:
            options = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                           configure_logging=True)
            try:
                if self.address:
                    ray.init(address=self.address, **options)
                else:
                    ray.init(num_cpus=self.requested_jobs or (os.cpu_count() or 1), **options)
            except Exception as exc:  # noqa: BLE001 - no cluster there, or it cannot start
                raise RunnerError(f"cannot start or join a Ray cluster: {' '.join(str(exc).split())[:300]}") \
                    from None
        try:
            cpus = int(ray.cluster_resources().get("CPU", 1))
            self.jobs = max(1, self.requested_jobs or cpus)
            super().run(tasks, on_record)
        finally:
            if started_here:
                ray.shutdown()
