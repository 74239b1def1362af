"""What crosses a worker's pipe (or a Ray actor's calls): its configuration, the tasks, and its replies.

Plain picklable dataclasses, sent through multiprocessing's pipes and the
forkserver: the parent (harness.engine.procs, ray_executor) builds them, the
worker (harness.engine.worker) reads them.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.core.records import Record


@dataclass(frozen=True)
class WorkerConfig:
    """How a worker sets itself up before its first task."""
    extra_paths: str  # NORMDIFF_EXTRA_PATHS: plug-in paths the parent registered
    sys_path: tuple[str, ...]  # the parent's import path (e.g. a test's path module)
    warm: tuple[str, ...]  # the modules to import before the first task (no-op when forked warm)
    threads: int = 1  # torch's and TVM's threads: jobs share the cores, and sums keep one order
    cache: dict | None = None  # ArtifactCache.config(), None: no persistent cache
    policy: dict | None = None  # the attribution Policy.config(), None: attribute every failure
    log: str = ""  # a process worker's log file (its stdout and stderr)
    max_memory: int | None = None  # a process worker's address-space limit in bytes, None: unbounded
    captured: str = ""  # the captured tensors' store folders (harness.core.captured.CAPTURED_ENV)


@dataclass(frozen=True)
class TaskMessage:
    """One execution for the worker; `reset`: a new group, drop the previous groups' artifacts first."""
    reset: bool
    spec: dict
    path: str
    attribute: bool = True


@dataclass(frozen=True)
class Ready:
    """The worker is set up and waits for tasks."""
    pid: int


@dataclass(frozen=True)
class Started:
    """The worker started its next task; its log held `log_offset` bytes then (where a crash's stack begins)."""
    log_offset: int


@dataclass(frozen=True)
class Done:
    """The worker finished a task: its record."""
    record: Record
