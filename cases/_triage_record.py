"""What a triage rule is and the record fields rules read (shared by cases.triage and cases.triage_compilers)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

Record = dict


@dataclass(frozen=True)
class Rule:
    upstream: str                      # "owner/repo#N" or "new"
    reason: str                        # one line
    match: Callable[[Record], bool]
    cpu: tuple[str, ...] = ()          # it matches only records of a CPU with one of these (an entry's "cpu")


def _case(r: Record) -> dict:
    return r["case"]


def _on(*paths: str):
    return lambda r: r["path"] in paths


def _msg(r: Record) -> str:
    return r.get("message") or ""


def _half(r: Record) -> bool:
    return _case(r)["dtype"] in ("float16", "bfloat16")
