"""What a fuzz run keeps: minimal failures in hypothesis' database, spec files, the summary."""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping

from harness.core.records import write_atomic
from harness.spec import CaseSpec
from harness.search.programs import explains

# A finding is told apart from others by these record/case fields.
SIGNATURE_FIELDS = ("path", "verdict", "pattern", "style", "dtype")

Signature = tuple[str, str, str, str, str]


def signature(record: dict, skeletons: Mapping[str, str] | None = None) -> Signature:
    """(path, verdict, pattern, style, dtype); a drawn program's is (path, verdict, pattern, "program",
    its skeleton): the bug, not the dtype it showed in, so two programs with one bug are one signature.
    `skeletons` (case_id -> skeleton key) is the caller's memory of what it drew; a program not in it is
    named by a hash of its text."""
    case = record["case"]
    if case.get("program") is not None:
        key = (skeletons or {}).get(record["case_id"])
        label = key or "text-" + hashlib.sha256(case["program"].encode()).hexdigest()[:8]
        return (record["path"], record["verdict"], case["pattern"], "program", label)
    return (record["path"], record["verdict"], case["pattern"], case["style"], case["dtype"])


def is_program(sig: Signature) -> bool:
    return sig[3] == "program"


def explained(sig: Signature, known) -> bool:
    """Whether a known program finding accounts for `sig` (same path, verdict, base; its changes among sig's)."""
    if not is_program(sig) or sig[4].startswith("text-"):
        return False
    return any(is_program(k) and k[:3] == sig[:3] and not k[4].startswith("text-") and explains(k[4], sig[4])
               for k in known)


def signature_name(sig: Signature) -> str:
    """The file-name form: path.verdict.pattern.style.dtype."""
    return ".".join(sig)


# -- the database of minimal failures ---------------------------------------------

DB_KEY = b"normdiff-fuzz.minimal-failures.v1"


def stored_findings(db) -> list[tuple[Signature, CaseSpec, bytes]]:
    """(signature, spec, raw entry) of every minimal failure kept, in signature order (a program's
    signature names its skeleton)."""
    out = []
    for raw in db.fetch(DB_KEY):
        try:
            entry = json.loads(raw.decode())
            out.append((tuple(entry["signature"]), CaseSpec.from_dict(entry["spec"]), raw))
        except Exception:  # noqa: BLE001 - an entry of an older format: drop it
            db.delete(DB_KEY, raw)
    return sorted(out, key=lambda e: (e[0], e[1].to_json()))


def drop_finding(db, raw: bytes) -> None:
    """Forget a kept minimal failure (it no longer fails)."""
    db.delete(DB_KEY, raw)


def keep_finding(db, sig: Signature, spec: CaseSpec) -> None:
    """Keep `spec` as the minimal failure of `sig`, replacing an earlier one."""
    for old_sig, _, raw in stored_findings(db):
        if old_sig == sig:
            db.delete(DB_KEY, raw)
    entry = {"signature": list(sig), "spec": spec.to_dict()}
    if is_program(sig):
        entry["skeleton"] = sig[4]
    db.save(DB_KEY, json.dumps(entry, sort_keys=True).encode())


# -- files ---------------------------------------------------------------------

def failures_dir(out_dir: str) -> str:
    return os.path.join(out_dir, "failures")


def save_failure(out_dir: str, sig: Signature, spec: CaseSpec) -> str:
    """Write the spec (plain docs/contracts.md §1 JSON, so `run --case` and `repro` take it) and return its path."""
    folder = failures_dir(out_dir)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, signature_name(sig) + ".json")
    return write_atomic(path, json.dumps(spec.to_dict(), indent=2) + "\n")


def clear_failures(out_dir: str) -> None:
    """Remove what an earlier fuzz run left in DIR (its failures and summary)."""
    folder = failures_dir(out_dir)
    if os.path.isdir(folder):
        for name in os.listdir(folder):
            if name.endswith(".json"):
                os.remove(os.path.join(folder, name))
    summary = os.path.join(out_dir, "fuzz.json")
    if os.path.exists(summary):
        os.remove(summary)
