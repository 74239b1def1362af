"""Warm imports: what a worker needs imported, and the forkserver that imports it once.

The forkserver preloads this module; with NORMDIFF_WARM_IMPORTS set it imports
the modules listed there, so every worker forked from it starts warm.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sys
import threading
from typing import Iterable

from harness import paths

HARNESS_IMPORTS = ("harness.engine.execute", "harness.oracle.reference", "harness.oracle.compare",
                   "harness.oracle.inputs", "harness.oracle.modules")


def warm_modules(path_names: list[str]) -> list[str]:
    """Modules to import before forking workers for these paths (each path names its own)."""

    mods = list(HARNESS_IMPORTS)
    table = paths.table()
    for name in path_names:
        if name not in table:
            continue
        mods.append(table[name].split(":")[0])
        try:
            path = paths.get(name)
        except Exception:  # noqa: BLE001 - the worker will record the failure
            continue
        mods += list(path.warm_imports)
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


# The forkserver preloads this module; with this variable set it warms up.
_WARM_ENV = "NORMDIFF_WARM_IMPORTS"
if os.environ.get(_WARM_ENV) and mp.parent_process() is None and __name__ == "harness.engine.warm":
    _mods = os.environ.pop(_WARM_ENV).split(",")
    warm(_mods)


def start_forkserver(modules: list[str]) -> None:
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
