"""Result records on disk: JSON Lines, appended and flushed one by one.

A run killed at any moment leaves every finished record readable; a torn last
line (the process died mid-write) is skipped by `read_results`.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
from typing import Any, Iterable, Iterator


def json_safe(value: Any) -> Any:
    """JSON has no NaN/Infinity: non-finite floats become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def dumps(record: dict) -> str:
    return json.dumps(json_safe(record), sort_keys=False, separators=(", ", ": "), allow_nan=False)


def one_line(text: str, limit: int = 200) -> str:
    """`text` folded onto one line of at most `limit` characters (for tables and stderr)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


TMP_PREFIX = ".tmp-"  # a file being written, renamed into place when whole (cleaners skip or reap these)


def temporary_file(folder: str, name: str = "", mode: int = 0o666) -> tuple[int, str]:
    """A new file in `folder` (named after `name`), open for writing, with `mode` less the umask.

    The kernel applies the umask as it does for open(), so nothing reads or
    changes the process-wide umask (tempfile.mkstemp would give 0600 instead).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(folder, TMP_PREFIX + secrets.token_hex(6) + (f"-{name}" if name else ""))
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name in {folder}")


def write_atomic(path: str, text: str, mode: int = 0o666) -> str:
    """Write `text` to `path` through a temporary file renamed into place.

    A kill or a full disk mid-write leaves the old file whole, never a torn one.
    The file's mode is `mode` less the umask, as a plain open() would give it
    (0644 under umask 022), so reports stay readable on a shared folder.
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = temporary_file(folder, os.path.basename(path), mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    return path


class ResultsWriter:
    """Appends records to a JSONL file, flushing after each one."""

    def __init__(self, path: str):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self._fh = open(path, "a", encoding="utf-8")

    def write(self, record: dict) -> None:
        self._fh.write(dumps(record) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def iter_results(path: str) -> Iterator[dict]:
    """Records of a results file, skipping a torn or blank line."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and "case_id" in record and "path" in record:
                yield record


def read_results(path: str) -> list[dict]:
    return list(iter_results(path))


def latest_per_execution(records: Iterable[dict]) -> list[dict]:
    """One record per (case_id, path): the last one written wins."""
    table: dict[tuple[str, str], dict] = {}
    for r in records:
        table[(r["case_id"], r["path"])] = r
    return list(table.values())
