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
import time
from typing import Iterable

from harness import paths

# A file: with this variable set, each warm() that imports anything appends one JSON line of when each entry
# began and ended (wall clock), so `make bench` can split a cold run's fixed start (harness.commands.bench_shard).
WARM_TIMES_ENV = "NORMDIFF_WARM_TIMES"

HARNESS_IMPORTS = ("harness.engine.execute", "harness.oracle.reference", "harness.oracle.compare",
                   "harness.oracle.inputs", "harness.oracle.modules")


def warm_modules(path_names: list[str], compiling: Iterable[str] | None = None) -> list[str]:
    """Modules to import before forking workers for these paths (each path names its own), with the warm-ups
    ("module:function" entries) of the paths in `compiling` (None: of every path): a warm-up serves the
    path's compiles, and a run whose artifacts the cache holds compiles nothing of that path; it restores
    them, with the path's `restore_warm_ups`."""

    compiling = None if compiling is None else set(compiling)
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
        if compiling is None or name in compiling:
            mods += list(path.warm_imports)
        else:
            mods += [m for m in path.warm_imports if ":" not in m] + list(path.restore_warm_ups)
    return list(dict.fromkeys(mods))


def warm(modules: Iterable[str]) -> None:
    """Import `modules`, ignoring failures (the execution will report them) and their chatter; an entry
    "module:function" also calls that function (a path's warm-up beyond imports, Path.warm_imports).

    The collector is paused meanwhile: the imports make hundreds of thousands
    of long-lived objects, and collecting while they are made cost a sizeable share of
    the import time (docs/measurements.md). If anything was imported, one collection of the youngest generation
    (where the collector, paused, left all the imports made) clears their
    garbage and gc.freeze() moves what is left out of the collector's
    generations: this process's full collections, and those of every worker
    forked from it, no longer walk the imported objects, nor
    write to their pages (the fork's copy-on-write memory stays shared).
    """
    import gc
    import importlib
    import warnings

    before = len(sys.modules)
    enabled = gc.isenabled()
    times = []
    gc.disable()
    try:
        with _quiet_fds(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in modules:
                module_name, _, function = name.partition(":")
                start = time.time()
                try:
                    module = importlib.import_module(module_name)
                    if function:
                        getattr(module, function)()
                except BaseException:  # noqa: BLE001 - an import must not kill a warm process
                    pass
                times.append((name, start, time.time()))
    finally:
        if enabled:
            gc.enable()
    if len(sys.modules) != before:
        gc.collect(0)
        gc.freeze()
        _note_times(times)


def _note_times(times: list[tuple[str, float, float]]) -> None:
    """Append this warm-up's entries and their wall-clock times to the file WARM_TIMES_ENV names, if any: one
    line, with whether this process is a multiprocessing child (a worker) or not (the forkserver)."""
    where = os.environ.get(WARM_TIMES_ENV)
    if not where:
        return
    import json

    line = json.dumps({"pid": os.getpid(), "worker": mp.parent_process() is not None, "end": time.time(),
                       "entries": [[name, round(a, 4), round(b, 4)] for name, a, b in times]})
    with contextlib.suppress(OSError):  # a measurement must not kill a warm process
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


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


# What the running forkserver of this process imported (None: none started here, or stopped since).
_SERVING: list = [None]


def start_forkserver(modules: list[str], fork: bool = False, env: dict[str, str] | None = None) -> None:
    """Start the forkserver with `modules` imported in it and Ctrl-C ignored by it and its children, and
    `env` in its environment as it imports (the libraries' own caches: see harness.engine.cache).

    With `fork` (where this process has /proc/self/fd), it is forked from this
    process instead of started as a fresh interpreter: what this process has
    imported already (torch, the harness: seconds) is not imported again.
    multiprocessing keeps one forkserver per process and reuses it: see
    `retire_forkserver` for one started for other modules.
    """
    from multiprocessing import forkserver

    if _SERVING[0] is None or forkserver._forkserver._forkserver_pid is None:
        _SERVING[0] = set(modules)
    env = dict(env or {})
    if fork and os.path.isdir("/proc/self/fd"):
        _fork_forkserver(forkserver._forkserver, modules, env)
        return
    main = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    saved = {name: os.environ.get(name) for name in (*env, _WARM_ENV)}
    os.environ.update({**env, _WARM_ENV: ",".join(modules)})
    try:
        forkserver.ensure_running()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if main:
            signal.signal(signal.SIGINT, old)


def retire_forkserver(modules: Iterable[str]) -> None:
    """Stop this process's forkserver unless it imported every one of `modules`; call it before forking
    anything else (a forked child holds the forkserver's "alive" pipe open).

    A run resolves its module cases first, on workers whose forkserver imports
    torch alone; reused as it is, it would leave every worker of the run to
    import its paths' modules and run their warm-ups itself (as the zoo's
    workers once did).
    """
    if _SERVING[0] is not None and not set(modules) <= _SERVING[0]:
        stop_forkserver()


def stop_forkserver() -> None:
    """Stop this process's forkserver (workers forked from it go on); the next start makes a fresh one.

    As multiprocessing's own ForkServer._stop, but without waiting for it to
    exit (a thread reaps it): it exits once every holder of its "alive" pipe
    has closed it, and a child forked from this process may still hold it.
    """
    from multiprocessing import forkserver, util

    _SERVING[0] = None
    server = forkserver._forkserver
    with server._lock:
        pid, address = server._forkserver_pid, server._forkserver_address
        if pid is None:
            return
        os.close(server._forkserver_alive_fd)
        server._forkserver_address = server._forkserver_alive_fd = server._forkserver_pid = None
    if address and not util.is_abstract_socket_namespace(address):
        with contextlib.suppress(OSError):
            os.unlink(address)
    threading.Thread(target=_reap, args=(pid,), daemon=True, name="normdiff-forkserver-reaper").start()


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)


_SUN_PATH_MAX = 104  # a Unix socket's path must fit sockaddr_un's sun_path (108 bytes on Linux, 104 on macOS)


def _short_socket_address() -> str:
    """A socket path in a short private folder under /tmp, for a TMPDIR too deep to hold one (a CI workspace, a
    test's folder): binding there would fail with "AF_UNIX path too long" and stop the run. Removed at exit."""
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="nd-", dir="/tmp")
    atexit.register(shutil.rmtree, folder, True)
    return os.path.join(folder, "forkserver")


def _fork_forkserver(server, modules: list[str], env: dict[str, str]) -> None:
    """multiprocessing's ForkServer.ensure_running, with os.fork where it starts a fresh interpreter.

    The fork happens on a bare thread, so the forkserver (and each worker's
    stack in a crash dump) starts from one frame, as the spawned one does, not
    from this process's whole stack. The child keeps only stdio, the listening
    socket and its end of the "alive" pipe (every other descriptor this process
    holds becomes /dev/null, so no pipe, lock or file of the run is held open
    by it), ignores Ctrl-C, drops this process's signal handlers, sets `env`,
    imports `modules` and runs multiprocessing's own forkserver loop until its clients
    are gone. Workers forked from it are forkserver workers like any other
    (same Process objects, sentinels and exit codes).
    """
    import _thread
    import socket
    from multiprocessing import connection, resource_tracker, util

    with server._lock:
        resource_tracker.ensure_running()
        if server._forkserver_pid is not None:
            pid, _ = os.waitpid(server._forkserver_pid, os.WNOHANG)
            if not pid:
                return  # still running
            os.close(server._forkserver_alive_fd)
            server._forkserver_address = server._forkserver_alive_fd = server._forkserver_pid = None
        with socket.socket(socket.AF_UNIX) as listener:
            address = connection.arbitrary_address("AF_UNIX")
            if len(os.fsencode(address)) >= _SUN_PATH_MAX:
                address = _short_socket_address()
            listener.bind(address)
            if not util.is_abstract_socket_namespace(address):
                os.chmod(address, 0o600)
            listener.listen()
            alive_r, alive_w = os.pipe()
            forked: list = []
            done = _thread.allocate_lock()
            done.acquire()
            try:
                _thread.start_new_thread(_forker, (server, listener.fileno(), alive_r, modules, env, forked, done))
                done.acquire()
                if not isinstance(forked[0], int):
                    raise forked[0]
            except BaseException:
                os.close(alive_w)
                raise
            finally:
                os.close(alive_r)
            server._forkserver_address, server._forkserver_alive_fd, server._forkserver_pid = (
                address, alive_w, forked[0])


def _forker(server, listener_fd: int, alive_r: int, modules: list[str], env: dict[str, str], forked: list,
            done) -> None:
    """On a bare thread: fork; the parent's side reports the pid, the child becomes the forkserver."""
    try:
        pid = os.fork()
    except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
        forked.append(exc)
        done.release()
        return
    if pid:
        forked.append(pid)
        done.release()
        return
    code = 0
    try:
        _forkserver_child(server, listener_fd, alive_r)
        os.environ.update(env)
        warm(modules)
        from multiprocessing import forkserver

        forkserver.main(listener_fd, alive_r, [])
    except SystemExit:
        pass
    except BaseException:  # noqa: BLE001 - its clients see it gone, as with any dead forkserver
        code = 1
    finally:
        os._exit(code)


def _forkserver_child(server, listener_fd: int, alive_r: int) -> None:
    """The forked forkserver's descriptors, signals and multiprocessing state, as a fresh one has them."""
    null = os.open(os.devnull, os.O_RDWR)
    keep = {0, 1, 2, listener_fd, alive_r, null}
    for fd in [int(n) for n in os.listdir("/proc/self/fd")]:
        if fd not in keep:
            with contextlib.suppress(OSError):  # the listing's own descriptor is gone already
                os.dup2(null, fd)  # closes ours, keeps the number taken (stale objects may hold it)
    for sig in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError, TypeError):
            if callable(signal.getsignal(sig)):
                signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as the spawned one inherits it; its children too
    server._lock = threading.Lock()  # held by the parent's thread at the fork
    server._forkserver_address = server._forkserver_alive_fd = server._forkserver_pid = None
