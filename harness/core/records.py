"""Result records on disk: JSON Lines, appended and flushed one by one.

A run killed at any moment leaves every finished record readable; a torn last
line (the process died mid-write) is skipped by `read_results`.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Iterable, Iterator


def _clean(value: Any) -> Any:
    """JSON has no NaN/Infinity: non-finite floats become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def dumps(record: dict) -> str:
    return json.dumps(_clean(record), sort_keys=False, separators=(", ", ": "), allow_nan=False)


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
