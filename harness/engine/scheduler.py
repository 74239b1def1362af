"""The scheduler: groups largest-first on warm workers, and work stealing from long groups."""
from __future__ import annotations

import contextlib
import json
import os
import sys
from collections import Counter, defaultdict, deque
from typing import Callable, Iterable

from harness import paths
from harness.core.records import write_atomic
from harness.core.verdicts import DEFAULT_TIMEOUT, Verdict
from harness.engine import stored
from harness.engine.cache import Origin
from harness.engine.plan import Group, Task, group_tasks
from harness.engine.procs import Procs, Worker

ENDGAME = 2.0  # affinity gives way to longest-first when the work left is within this many largest groups a worker
MIN_STEAL_GAIN = 0.5  # seconds a split must save before a group's tail moves to an idle worker
# Seconds a warm module takes to import once torch and the harness are loaded, the collector paused
# as warm() does (docs/measurements.md); they only order which path
# family a bridge worker takes. Others count 2 s.
IMPORT_SECONDS = {"executorch.exir": 3.0, "executorch.runtime": 0.01, "torch._dynamo": 1.1,
                  "torch._inductor.compile_fx": 1.0, "tvm": 1.4, "tvm.relax": 0.0,
                  "tvm.relax.frontend.torch": 0.01, "torch.onnx": 0.04, "onnx": 0.03, "onnxscript": 0.45,
                  "onnxruntime": 0.04, "harness.paths.inductor:warm_up": 3.0,
                  "harness.paths._frontend_memo:install_decompositions": 0.01,
                  "harness.paths._frontend_memo:install_onnx_registry": 0.01,
                  "harness.paths.executorch_xnnpack:warm_up": 10.0,
                  "iree.compiler": 0.2, "iree.runtime": 2.2, "iree.turbine.aot": 4.1, "openvino": 0.3,
                  "openvino.frontend.pytorch": 0.02}


def _address_space_gb() -> float:
    """This process's virtual size (what a process forked from it starts with under RLIMIT_AS)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE") / 2**30
    except (OSError, ValueError, IndexError):
        return float("inf")


HIT_SECONDS = 0.05  # what restoring an artifact from the disk cache costs, until the run has measured it
ESTIMATES_FILE = "estimates.json"  # in the cache folder: each path's compile seconds, as the last runs measured


class _Mean:
    """A running mean (sum and count): the scheduler asks for estimates for every pending group, often."""

    __slots__ = ("total", "count")

    def __init__(self):
        self.total, self.count = 0.0, 0

    def add(self, value: float) -> None:
        self.total += value
        self.count += 1

    def __bool__(self) -> bool:
        return self.count > 0

    @property
    def value(self) -> float:
        return self.total / self.count


class _Estimates:
    """Per-path prepare seconds (built, or restored from the disk cache) and execution seconds, learnt from
    the records so far; before a path's first record, what earlier runs measured (`prior`)."""

    def __init__(self, prior: dict[str, float] | None = None):
        self.prior = dict(prior or {})
        self.prep: dict[str, _Mean] = defaultdict(_Mean)
        self.hit: dict[str, _Mean] = defaultdict(_Mean)
        self.exec: dict[str, _Mean] = defaultdict(_Mean)
        self.all_prep, self.all_exec = _Mean(), _Mean()

    def add(self, r: dict) -> None:
        if r.get("verdict") in (Verdict.CRASH, Verdict.TIMEOUT):
            return
        prep = r.get("prepare_seconds") or 0.0
        if not r.get("cache_hit"):
            if r.get("artifact_cache") == Origin.HIT:
                self.hit[r["path"]].add(prep)
            else:
                self.prep[r["path"]].add(prep)
                self.all_prep.add(prep)
        run = max(0.0, (r.get("seconds") or 0.0) - prep)
        self.exec[r["path"]].add(run)
        self.all_exec.add(run)

    def known(self, path: str) -> bool:
        return bool(self.prep.get(path) or self.hit.get(path)) and bool(self.exec.get(path))

    def prepare(self, path: str, cached: bool = False) -> float:
        if cached:
            return self.hit[path].value if self.hit.get(path) else HIT_SECONDS
        if self.prep.get(path):
            return self.prep[path].value
        if path in self.prior:
            return self.prior[path]
        if self.all_prep:
            return self.all_prep.value
        return sum(self.prior.values()) / len(self.prior) if self.prior else 1.0

    def execution(self, path: str) -> float:
        mean = self.exec.get(path) or self.all_exec
        return max(1e-4, mean.value) if mean else 0.05

    def measured(self) -> dict[str, float]:
        """Each path's mean compile seconds in this run (the paths it built at least MIN_SAMPLES artifacts of)."""
        return {p: m.value for p, m in self.prep.items() if m.count >= MIN_SAMPLES}


MIN_SAMPLES = 3


def load_estimates(cache) -> dict[str, float]:
    """The compile seconds per path earlier runs measured, from the cache folder ({} without one)."""
    if cache is None:
        return {}
    try:
        with open(os.path.join(cache.root, ESTIMATES_FILE), encoding="utf-8") as fh:
            data = json.load(fh)
        return {str(k): float(v) for k, v in data["prepare"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def save_estimates(cache, estimates: _Estimates) -> None:
    """Keep this run's compile seconds per path for the next run's ordering (best effort)."""
    if cache is None or not estimates.measured():
        return
    merged = {**load_estimates(cache), **{p: round(v, 4) for p, v in estimates.measured().items()}}
    with contextlib.suppress(OSError):
        os.makedirs(cache.root, exist_ok=True)
        write_atomic(os.path.join(cache.root, ESTIMATES_FILE), json.dumps({"prepare": merged}, indent=1) + "\n")


def mark_cached(groups: list[Group], cache, module_digests: dict[str, str] | None = None) -> None:
    """Mark the groups whose artifact (or kept failure) the disk cache holds: they cost a restore, not a
    compile (and their paths' warm-ups are not needed). A module case's key holds its class's digest, which
    this process (never importing the class) has only from the preflight's `module_digests`
    ({structure key: digest}); without one it is left unmarked."""
    if cache is None:
        return
    for g in groups:
        spec = g.tasks[0].spec
        salt = ""
        if spec.is_module:
            salt = (module_digests or {}).get(spec.structure_key(), "")
            if not salt:
                continue
        try:
            path = paths.get(g.path)
            if not path.artifact_cacheable:
                continue
            g.cached = any(os.path.exists(cache.file_of(cache.key(path, spec, salt, kind=kind)))
                           for kind in ("", stored.FAILURE))
        except Exception:  # noqa: BLE001 - an unknown path: its worker records the failure
            continue


# -- a whole run ----------------------------------------------------------------

class Runner:
    """Runs a list of tasks on `jobs` warm workers, a group at a time, handing each record to `on_record`."""

    affinity = True  # a worker takes the next path of the structure it just ran, where one is pending
    bridging = True  # bridge workers work while the forkserver imports (see _bridges)
    fork_server = True  # the forkserver is forked from this process, which has torch already (see _procs)

    def __init__(self, jobs: int, timeout: float = DEFAULT_TIMEOUT, path_names: Iterable[str] = (),
                 start_method: str = "forkserver", max_memory: float | None = None, cache=None, policy=None):
        self.jobs = max(1, jobs)
        self.max_memory = max_memory  # GB per worker (None: unbounded)
        self.cache = cache  # the persistent ArtifactCache, or None
        self.policy = policy  # which failures get an attribution (harness.attribution.policy), None: every one
        self.timeout = timeout
        self.path_names = sorted(set(path_names))
        self.start_method = start_method
        self.estimates = _Estimates()
        self.workers: list[Worker] = []
        self.pending: list[Group] = []
        self.module_digests: dict[str, str] = {}  # {structure key: module digest} from the preflight (mark_cached)

    def run(self, tasks: list[Task], on_record: Callable[[dict], None]) -> None:
        self.pending = group_tasks(tasks)
        if not self.pending:
            return
        mark_cached(self.pending, self.cache, self.module_digests)
        self.estimates = _Estimates(load_estimates(self.cache))
        names = self.path_names or sorted({t.path for t in tasks})
        self.procs = self._procs(names)
        graceful = False
        try:
            # As many workers as tasks allow: an idle one may take the tail of a long group.
            # Bridges work while the forkserver imports; the others arrive when it is warm.
            count = min(self.jobs, len(tasks))
            families = self._bridges(count - 1)
            self.workers = [self.procs.start(only) for only in families]
            if families:
                self.procs.leave_to_bridges(families)
            self.procs.launch(count - len(self.workers))
            while self.pending or any(w.task or (w.group and w.group.tasks) for w in self.workers):
                self.workers += self.procs.arrived()
                for w in list(self.workers):
                    if w.ready and w.task is None:
                        self._assign(w)
                    if w.ready and w.task is not None:
                        self._queue(w)
                self.procs.wait(self.workers)
                for i, w in enumerate(self.workers):
                    self._service(i, w, on_record)
            graceful = True
            save_estimates(self.cache, self.estimates)
        finally:
            try:
                self.workers += self.procs.arrived(wait=graceful, errors=graceful)
            finally:
                self.procs.close(self.workers, graceful)
                self.workers = []

    def _bridges(self, count: int) -> list[list[str]]:
        """Path families for up to `count` bridge workers (see _family), none sharing a path. None for
        fewer groups than workers: the others could then only split a group, and the bridge would run
        it all."""
        if count < 1 or not (self.bridging and self.procs.bridges) or len(self.pending) <= count:
            return []
        if not self._forkable():
            return []
        chosen: list[list[str]] = []
        taken: set[str] = set()
        while len(chosen) < count:
            family = self._family(taken, set(sys.modules))
            if not family:
                break
            chosen.append(family)
            taken.update(family)
        return chosen

    def _family(self, taken: set[str], have: set[str]) -> list[str]:
        """The pending paths one process holding `have` (modules, and "module:function" warm-ups it ran)
        would best import for next: a path and every path whose warm imports its own cover, the family
        with the most pending tasks not in `taken` per second of the imports it still needs ([] if no
        pending path is left outside `taken`)."""
        tasks = Counter(g.path for g in self.pending for _ in g.tasks)
        warm = {}
        for name in tasks:
            try:
                warm[name] = set(paths.get(name).warm_imports)
            except Exception:  # noqa: BLE001 - the worker records the failure
                continue
        best, best_worth = [], 0.0
        for p in sorted(warm):
            family = [q for q in sorted(warm) if warm[q] <= warm[p]]
            todo = sum(tasks[q] for q in family if q not in taken)
            cost = sum(IMPORT_SECONDS.get(m, 2.0) for m in warm[p] if m not in have)
            if todo and todo / (1.0 + cost) > best_worth:
                best, best_worth = family, todo / (1.0 + cost)
        return best

    def _widen(self, w: Worker) -> bool:
        """Give bridge `w`, its own paths done, the next family while the forkserver still imports (no
        warm worker has arrived): it imports what that family needs itself, at a fraction of the
        forkserver's whole warm-up, instead of leaving its core idle until then (a bridge given eager
        alone idled for most of the wait). False once a warm worker
        is here (a fresh one from the forkserver takes the bridge's place) or no path is left."""
        if any(v.paths is None for v in self.workers):
            return False
        have = set(sys.modules).union(*(paths.get(p).warm_imports for p in w.paths))
        family = self._family(set(w.paths), have)
        if not family:
            return False
        w.paths = w.paths | frozenset(family)
        return True

    def _forkable(self) -> bool:
        """Whether workers may start from a fork of this process: a bridge, or the forkserver,
        inherits its address space, and under --max-memory little might be left."""
        return not (self.max_memory and _address_space_gb() > self.max_memory / 2)

    def _procs(self, names: list[str]):
        """What starts and watches the workers (the Ray executor gives actors instead)."""
        return Procs(names, self.timeout, self.start_method, self.max_memory,
                     cache=self.cache.config() if self.cache else None,
                     policy=self.policy.config() if self.policy else None,
                     compiling={g.path for g in self.pending if not g.cached},
                     fork_server=self.fork_server and self._forkable())

    def _assign(self, w: Worker) -> None:
        reset = False
        if w.group is None or not w.group.tasks:
            w.group, reset = self._next_group(w.last_structure, w.paths), True
        if w.group is None and w.paths is not None and self.pending and self._widen(w):  # a bridge, its paths done
            w.group, reset = self._next_group(w.last_structure, w.paths), True
        if w.group is None:
            if w.paths is not None and self.pending:  # a bridge with nothing left to widen to, or warm workers here
                self.workers.remove(w)
                self.procs.retire(w)
                self.procs.launch(1)  # a full worker takes its place
            return
        task = w.group.tasks.popleft()
        w.last_structure = w.group.structure
        if not self.procs.send(w, task, reset):  # gone between tasks: the service loop replaces it
            w.group.tasks.appendleft(task)

    def _queue(self, w: Worker) -> None:
        """Send busy worker `w` the next tasks of its own group, up to the executor's lookahead, to start
        when it finishes the current one (never another group's: a group switch waits for an idle worker,
        and what a dead worker held goes back to its group)."""
        while len(w.queued) < self.procs.lookahead and w.group is not None and w.group.tasks:
            task = w.group.tasks.popleft()
            if not self.procs.send(w, task, False):
                w.group.tasks.appendleft(task)
                return

    def _next_group(self, last_structure: str = "", allowed: frozenset | None = None) -> Group | None:
        """The pending group with the most estimated work, else the tail of a long running one.

        Longest first, so that what is left at the end is short and no worker
        idles long while another finishes: a group's work is its compile (what
        earlier runs measured for its path, or a restore where the disk cache
        holds its artifact) and its executions. With `affinity`, another path's
        group of the structure the worker just ran comes first (its
        torch.export is still in the worker's memo), until the work left is
        within ENDGAME times the largest group per worker: then longest first
        alone. A bridge takes only groups of the paths it is `allowed`.
        """
        pool = [i for i in range(len(self.pending)) if allowed is None or self.pending[i].path in allowed]
        if pool:
            work = self._work(pool)
            if self.affinity and last_structure and sum(work.values()) > ENDGAME * self.jobs * max(work.values()):
                pool = [i for i in pool if self.pending[i].structure == last_structure] or pool
            best = max(pool, key=lambda i: (work[i], -i))
            return self.pending.pop(best)
        return self._steal(allowed)

    def _work(self, pool: list[int]) -> dict[int, float]:
        """{i: estimated seconds of pending group i: its compile (or restore) and its executions}, each path's
        estimates read once: this runs for every group a worker takes, over every pending group."""
        per_path: dict[tuple[str, bool], tuple[float, float]] = {}
        work = {}
        for i in pool:
            g = self.pending[i]
            costs = per_path.get((g.path, g.cached))
            if costs is None:
                costs = per_path[(g.path, g.cached)] = (self.estimates.prepare(g.path, g.cached),
                                                        self.estimates.execution(g.path))
            work[i] = costs[0] + len(g.tasks) * costs[1]
        return work

    def _steal(self, allowed: frozenset | None = None) -> Group | None:
        """Split the running group with the most work left, if that ends it MIN_STEAL_GAIN sooner."""
        best, best_take, best_left = None, 0, 0.0
        for v in self.workers:
            g = v.group
            if g is None or len(g.tasks) < 2 or not self.estimates.known(g.path):
                continue
            if allowed is not None and g.path not in allowed:
                continue
            p, e = self.estimates.prepare(g.path, g.cached), self.estimates.execution(g.path)
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
        return Group(best.path, best.structure, tail, best.cached)

    def _service(self, i: int, w: Worker, on_record) -> None:
        kind, payload = self.procs.check(w)
        if kind == "record":
            self.estimates.add(payload)
            on_record(payload)
            return
        if not kind:
            return
        while w.queued:  # sent, never started: back to their group, in order
            w.group.tasks.appendleft(w.queued.pop())
        if kind == "failed":
            on_record(payload)
        elif kind == "requeue":
            w.group.tasks.appendleft(payload)
        if w.group is not None and w.group.tasks:
            self.pending.insert(0, w.group)  # the rest of its group continues on a new worker
        self.workers[i] = self.procs.start()
