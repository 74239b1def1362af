"""What the Executor keeps in the artifact cache besides artifacts: failures to build one, and attributions.

A path that cannot take a structure (`unsupported`) or fails to export or
compile it fails the same way on every run with the same code and
libraries, which the key holds; rebuilding it was most of what a warm run
still compiled (ONNX Runtime exports a bfloat16 model and starts a session
to learn it has no kernel for it). A failure that looks like the machine's
(a refused allocation, a full disk, a killed child: MOMENTARY) may come
from the moment: it is never kept. An attribution re-runs the path's graph with its intermediates
exposed (a TVM compile, a to_edge); it is kept per execution, keyed by the
whole harness's source, the path's key parts, the spec, a module case's
salt, the verdict and the bytes of the output it explains.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace

import numpy as np

from harness.core.memory import OUT_OF_MEMORY
from harness.core.records import Attribution, Record
from harness.core.verdicts import Verdict
from harness.paths.base import StageError, Unsupported

FAILURE = "failure"
ATTRIBUTION = "attribution"
# The record keys an attribution sets (harness.attribution.annotate), besides its fact and its seconds.
ATTRIBUTION_KEYS = ("attribution", "first_stage_over", "attribution_note")

# What the machine, not the code, makes fail: the memory limit, the disk, descriptors, a killed child, a clock.
MOMENTARY = re.compile(OUT_OF_MEMORY.pattern + r"|OSError|IOError|\[Errno|No space left|Too many open files|"
                       r"Resource temporarily unavailable|BrokenPipe|ConnectionError|TimeoutError|"
                       r"CalledProcessError|Killed", re.IGNORECASE)


def failure_bytes(exc: Exception) -> bytes | None:
    """A failure to keep, as bytes; None for one that may come from the moment (MOMENTARY)."""
    if isinstance(exc, Unsupported):
        return json.dumps({"kind": Verdict.UNSUPPORTED.value, "message": str(exc)}).encode()
    if isinstance(exc, StageError) and not MOMENTARY.search(exc.message):
        return json.dumps({"kind": Verdict.ERROR.value, "stage": exc.stage, "message": exc.message}).encode()
    return None


def failure_of(data: bytes) -> Exception:
    """The failure `failure_bytes` kept (anything else raises: the entry is then dropped)."""
    kept = json.loads(data)
    if kept["kind"] == Verdict.UNSUPPORTED:
        return Unsupported(kept["message"])
    if kept["kind"] == Verdict.ERROR:
        return StageError(kept["stage"], kept["message"])
    raise ValueError(f"not a kept failure: {kept['kind']!r}")


def output_digest(out) -> str:
    """sha256 of an output's dtype, shape and bytes; of each output's in turn for a tuple of several."""
    h = hashlib.sha256()
    for a in out if isinstance(out, tuple) else (out,):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode() + a.tobytes())
    return h.hexdigest()


def attribution_key(cache, path, spec, salt: str, verdict: str, out) -> str:
    return cache.derived_key(ATTRIBUTION, path=cache.key_parts(path), spec=spec.to_dict(), module=salt,
                             verdict=str(verdict), output=output_digest(out))


def attribution_bytes(record: Record) -> bytes:
    kept = {k: v for k, v in record.attribution.to_dict().items() if k in ATTRIBUTION_KEYS}
    kept["fact"] = record.facts.get("attribution")
    return json.dumps(kept).encode()


def apply_attribution(record: Record, data: bytes) -> Record:
    """`record` with a kept attribution, as the attribution itself gave it (its seconds are the caller's)."""
    kept = json.loads(data)
    fact = kept.pop("fact")
    if not set(kept) <= set(ATTRIBUTION_KEYS) or "attribution" not in kept:
        raise ValueError("not a kept attribution")
    found = Attribution(kept["attribution"], kept.get("first_stage_over"), kept.get("attribution_note"))
    return replace(record.with_fact("attribution", fact), attribution=found)
