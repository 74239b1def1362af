"""The worker process: serves tasks, keeping prepared artifacts until told to drop them."""
from __future__ import annotations

import gc
import os
import resource
import signal
import sys
import threading
import time
from dataclasses import replace

from harness.core.captured import CAPTURED_ENV
from harness.core.memory import OUT_OF_MEMORY, memory_note
from harness.core.records import Record
from harness.core.verdicts import Verdict
from harness.spec import CaseSpec
from harness.engine.cache import use_library_caches_of
from harness.engine.execute import executor_from_config, failed
from harness.engine.messages import Done, Ready, Started, TaskMessage, WorkerConfig
from harness.engine.warm import warm
from harness.paths.base import first_line

# The collector's thresholds in a worker, set once it is warm (docs/measurements.md#the-collector-in-the-workers).
WORKER_GC_THRESHOLDS = (50_000, 10, 10)
"""gc.set_threshold for every worker (a forkserver's, a bridge, a Ray actor, a Pool's lane), after its warm-up.

A compile (torch.export and its decompositions, to_edge, TVM, Inductor, ONNX) makes millions of container objects
that live for its few seconds: at Python's own (700, 10, 10) they outlive the young collections, reach the
oldest generation, and each full collection walks them with what earlier compiles left (caches, the exports kept
for the next path): 31-46 full collections in 8-12 structures on every path, 12 % of a worker's CPU. With a young
generation of 50,000 most of it dies young: the collector's CPU fell to 0.29 of what it was on every path and
0.10 over 293 structures on cheap paths, whose RSS stayed within 3 % of Python's setting (full collections still
run, after 5 million net allocations). gc.freeze() after each group cut a little more but froze garbage for good:
the RSS grew twice as fast. Records are the same (the collector never changes what a computation gives).
"""


def worker_main(conn, cfg: WorkerConfig) -> None:
    """Serve tasks until told to stop, keeping prepared artifacts until told to drop them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    try:
        log = os.open(cfg.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:  # launched as the run stopped: its folder is gone, and nobody waits for it
        os._exit(0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    import faulthandler

    # A crash leaves its stack in the log (fd 2, whatever sys.stderr is). Disabled first: a worker forked from a
    # process where faulthandler was on (pytest's, a forkserver's) inherits it as on, and enable() then only moves
    # its file, keeping no handler if a library has since put its own on SIGABRT: the crash left an empty log
    # (tests/engine/test_procs.py, under xdist). disable() + enable() installs faulthandler's handlers again.
    faulthandler.disable()
    faulthandler.enable(file=2, all_threads=False)
    _watch_parent(os.getppid())
    executor = warm_executor(cfg)
    if cfg.max_memory:
        limit_memory(cfg.max_memory)
    conn.send(Ready(os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        conn.send(Started(os.fstat(2).st_size))  # where this task's output (a crash's stack) begins in the log
        if msg.reset:  # a new group: drop the artifacts of the previous ones (recent exports stay)
            executor = executor.fresh()
        record = execute_guarded(executor, msg)
        if cfg.max_memory:
            record = note_memory_limit(record, cfg.max_memory)
        conn.send(Done(record))


def warm_executor(cfg: WorkerConfig):
    """A worker's (a process's or a Ray actor's) set-up: the parent's import path and plug-in paths, the
    libraries' caches under the artifact cache (before the warm-ups: a bridge runs its own), the warm-ups,
    its threads; then its Executor."""
    import warnings

    sys.path.extend(p for p in cfg.sys_path if p not in sys.path)  # e.g. a test's path module
    if cfg.extra_paths:
        os.environ["NORMDIFF_EXTRA_PATHS"] = cfg.extra_paths
    else:
        os.environ.pop("NORMDIFF_EXTRA_PATHS", None)
    if cfg.captured:  # where a captured input is read from (a forkserver's environment may be older)
        os.environ[CAPTURED_ENV] = cfg.captured
    warnings.filterwarnings("ignore")  # library deprecation chatter is not a finding
    cache = use_library_caches_of(cfg.cache)
    warm(list(cfg.warm))  # no-op when forked from the warm forkserver
    gc.set_threshold(*WORKER_GC_THRESHOLDS)  # after the warm-up, which pauses the collector as it imports
    if cfg.threads:  # jobs share the cores; one thread each also keeps sums in one order
        import torch

        torch.set_num_threads(cfg.threads)
        os.environ["TVM_NUM_THREADS"] = str(cfg.threads)
    return executor_from_config(cfg, cache)


def execute_guarded(executor, msg: TaskMessage) -> Record:
    """The task's record; a harness bug is still one record (an `error` at stage `run`)."""
    try:
        return executor.execute(msg.spec, msg.path, attribute=msg.attribute)
    except Exception as exc:  # noqa: BLE001 - a harness bug is still one record
        return failed(CaseSpec.from_dict(msg.spec), msg.path, Verdict.ERROR, stage="run",
                      message=f"harness: {first_line(exc)}")


def limit_memory(limit: int) -> None:
    """Cap this process's address space at `limit` bytes: a larger allocation fails here, not the machine."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def note_memory_limit(record: Record, limit: int) -> Record:
    """An error that is a refused allocation says so, with the limit that refused it."""
    if record.verdict == Verdict.ERROR and OUT_OF_MEMORY.search(record.message or ""):
        return replace(record, message=f"{record.message} [{memory_note(limit)}]",
                       memory_limit_gb=round(limit / 2**30, 3))
    return record


def _watch_parent(ppid: int) -> None:
    """Exit when the process that started us is gone (the run was killed)."""
    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != ppid:
                os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
