"""Workers' memory: the default limit, what a refused allocation looks like, and how a record names the limit.

Each worker's address space is capped (`run --max-memory GB`), so a case
that allocates without bound fails in its worker, as one record, not the
machine. The default shares DEFAULT_MEMORY_FRACTION of the machine between
the jobs, never below MIN_MEMORY_GB (a warm worker with torch, TVM and
ExecuTorch imported already maps most of that before its first case).
"""
from __future__ import annotations

import os
import re

DEFAULT_MEMORY_FRACTION = 0.6
MIN_MEMORY_GB = 2.0

# What an allocation refused under RLIMIT_AS looks like from Python, numpy, torch and C++.
OUT_OF_MEMORY = re.compile(r"MemoryError|Unable to allocate|can't allocate memory|Cannot allocate memory|"
                           r"bad_alloc|out of memory", re.IGNORECASE)


def machine_memory_gb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def default_max_memory_gb(jobs: int) -> float:
    """Each worker's share of DEFAULT_MEMORY_FRACTION of the machine, at least MIN_MEMORY_GB."""
    return round(max(MIN_MEMORY_GB, DEFAULT_MEMORY_FRACTION * machine_memory_gb() / max(1, jobs)), 1)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` is a refused allocation (a MemoryError, or a library's error that says so)."""
    return isinstance(exc, MemoryError) or bool(OUT_OF_MEMORY.search(f"{type(exc).__name__}: {exc}"))


def memory_note(limit: int) -> str:
    """The words a record gets when the worker's limit of `limit` bytes refused an allocation."""
    return f"over the worker memory limit of {limit / 2**30:g} GB (--max-memory)"
