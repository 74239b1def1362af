"""The worker process: serves tasks, keeping prepared artifacts until told to drop them."""
from __future__ import annotations

import os
import resource
import signal
import sys
import threading
import time

from harness.core.verdicts import Verdict
from harness.spec import CaseSpec
from harness.engine.cache import use_library_caches_of
from harness.engine.execute import base_record, executor_from_config
from harness.engine.stored import OUT_OF_MEMORY
from harness.engine.warm import warm
from harness.paths.base import first_line


def worker_main(conn, cfg: dict) -> None:
    """Serve tasks until told to stop, keeping prepared artifacts until told to drop them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    sys.path.extend(p for p in cfg["sys_path"] if p not in sys.path)  # e.g. a test's path module
    if cfg["extra_paths"]:
        os.environ["NORMDIFF_EXTRA_PATHS"] = cfg["extra_paths"]
    else:
        os.environ.pop("NORMDIFF_EXTRA_PATHS", None)
    try:
        log = os.open(cfg["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:  # launched as the run stopped: its folder is gone, and nobody waits for it
        os._exit(0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    import faulthandler
    import warnings

    faulthandler.enable(file=2, all_threads=False)  # a crash leaves its stack in the log (fd 2, whatever sys.stderr is)
    warnings.filterwarnings("ignore")  # library deprecation chatter is not a finding
    _watch_parent(os.getppid())
    cache = use_library_caches_of(cfg.get("cache"))  # before the warm-ups: a bridge runs its own
    warm(cfg["warm"])  # no-op when forked from the warm forkserver
    if cfg.get("threads"):  # jobs share the cores; one thread each also keeps sums in one order
        import torch

        torch.set_num_threads(cfg["threads"])
        os.environ["TVM_NUM_THREADS"] = str(cfg["threads"])
    limit = cfg.get("max_memory")
    if limit:
        limit_memory(limit)
    executor = executor_from_config(cfg, cache)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        reset, spec_dict, path, attribute = msg
        conn.send(("started", os.fstat(2).st_size))  # where this task's output (a crash's stack) begins in the log
        if reset:  # a new group: drop the artifacts of the previous ones (recent exports stay)
            executor = executor.fresh()
        try:
            record = executor.execute(spec_dict, path, attribute=attribute)
        except Exception as exc:  # noqa: BLE001 - a harness bug is still one record
            record = base_record(CaseSpec.from_dict(spec_dict), path)
            record.update(verdict=Verdict.ERROR, stage="run", message=f"harness: {first_line(exc)}")
        if limit:
            note_memory_limit(record, limit)
        conn.send(("record", record))


def limit_memory(limit: int) -> None:
    """Cap this process's address space at `limit` bytes: a larger allocation fails here, not the machine."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def memory_note(limit: int) -> str:
    return f"over the worker memory limit of {limit / 2**30:g} GB (--max-memory)"


def note_memory_limit(record: dict, limit: int) -> None:
    """An error that is a refused allocation says so, with the limit that refused it."""
    if record.get("verdict") == Verdict.ERROR and OUT_OF_MEMORY.search(record.get("message") or ""):
        record["message"] = f"{record['message']} [{memory_note(limit)}]"
        record["memory_limit_gb"] = round(limit / 2**30, 3)


def _watch_parent(ppid: int) -> None:
    """Exit when the process that started us is gone (the run was killed)."""
    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != ppid:
                os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
