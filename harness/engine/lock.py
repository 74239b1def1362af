"""One writer per output folder: an advisory lock on DIR/.lock holding the writer's pid.

Two runs into one folder used to both finish "as usual" while the second had
removed the file the first was writing. Now the second stops before it
touches anything, naming the folder and the pid that holds it. The lock is
`fcntl.flock` on an open file, so the kernel releases it when its process
dies, however it dies (a SIGKILLed run can be resumed at once); the file
itself stays, which avoids the unlink-while-locking race. The lock is
re-entrant within a process: the command and the engine both take it.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import Iterator

from harness.core.errors import UsageError

LOCK_NAME = ".lock"
_HELD: dict[str, list] = {}  # realpath -> [fd, depth]


class FolderBusy(UsageError):
    """Another process is writing the folder; the message is one line."""


def _holder(fd: int) -> str:
    """The pid written in the lock file (the holder may be writing it right now)."""
    for _ in range(20):
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 64).decode("ascii", "replace").strip()
        if text:
            return text
        time.sleep(0.05)
    return "unknown"


@contextlib.contextmanager
def folder_lock(folder: str) -> Iterator[str]:
    """Hold the lock on `folder` (created if needed) for the block; FolderBusy if another process has it."""
    os.makedirs(folder, exist_ok=True)
    real = os.path.realpath(folder)
    if real in _HELD:
        _HELD[real][1] += 1
        try:
            yield real
        finally:
            _HELD[real][1] -= 1
        return
    fd = os.open(os.path.join(folder, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        pid = _holder(fd)
        os.close(fd)
        raise FolderBusy(f"{folder} is being written by another run (pid {pid}); "
                         "wait for it or choose another --out") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _HELD[real] = [fd, 1]
    try:
        yield real
    finally:
        del _HELD[real]
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
