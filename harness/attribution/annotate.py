"""The record keys of attribution, for a failing execution: `attribution`, `first_stage_over` and a fact.

`annotate(record, spec, path, inputs, out)` is the engine's one call; it
never raises (a failure to attribute is a fact, never a lost record).
"""
from __future__ import annotations

import time

from harness.attribution.capture import Unavailable
from harness.attribution.score import changes_of, entries, first_stage_over
from harness.attribution.stages import program_stages
from harness.core.verdicts import Verdict
from harness.paths.base import first_line

# The verdicts whose executions get an attribution: the path ran and its output is wrong in value or dtype.
ATTRIBUTED = frozenset({Verdict.INACCURATE, Verdict.DTYPE_MISMATCH, Verdict.NONFINITE})
CAPTURES = {"count": 0}  # re-runs made in this process (tests check passing executions make none)


def _reader(path):
    """fn(spec, module, x) -> Capture for paths whose intermediates can be read; Unavailable otherwise."""
    from harness.paths.eager import EagerPath
    from harness.paths.executorch_recompose import RecomposeCapturePath, RecomposePath
    from harness.paths.tvm import TvmPath

    if isinstance(path, TvmPath):
        from harness.attribution import relax

        return lambda spec, module, x: relax.capture(path, module, _example(spec, x), x)
    if isinstance(path, (RecomposePath, RecomposeCapturePath)):
        from harness.attribution import fx

        return lambda spec, module, x: fx.capture_recompose(path, spec, module, x)
    if isinstance(path, EagerPath):
        from harness.attribution import fx

        return lambda spec, module, x: fx.capture_eager(spec, module, x)
    raise Unavailable(f"path {path.name!r} does not expose its intermediates (a compiled library or "
                      "a delegated program runs as one call)")


def _example(spec, x):
    from harness.core.tensors import to_torch
    from harness.paths.base import input_arrays

    arrays = input_arrays(x)
    tensors = tuple(to_torch(a, spec.layout) for a in arrays)
    return tensors if isinstance(x, tuple) else tensors[0]


def attribute(spec, path, inputs, out, verdict: str) -> dict:
    """{"attribution", "first_stage_over", "attribution_note"}; Unavailable if it cannot be done."""
    from harness.oracle.modules import build_module

    reader = _reader(path)
    stages = program_stages(spec, inputs)
    CAPTURES["count"] += 1
    capture = reader(spec, build_module(spec, inputs.params), inputs.run_arg)
    changes = changes_of(capture, out)
    attribution = entries(stages, capture, approximate=bool(changes))
    note = capture.method + ("; approximate: " + "; ".join(changes) if changes else
                             "; the re-run's output is bit-identical to the path's")
    return {"attribution": attribution, "first_stage_over": first_stage_over(attribution, verdict),
            "attribution_note": note}


def annotate(record: dict, spec, path, inputs, out) -> None:
    """Add the attribution keys to a failing record (nothing for other verdicts)."""
    if record.get("verdict") not in ATTRIBUTED:
        return
    start = time.perf_counter()
    try:
        record.update(attribute(spec, path, inputs, out, record["verdict"]))
        record.setdefault("facts", {})["attribution"] = "read"
    except Unavailable as exc:
        record.update(attribution=None, first_stage_over=None)
        record.setdefault("facts", {})["attribution"] = f"unavailable: {exc}"
    except Exception as exc:  # noqa: BLE001 - attribution is extra: the record stands without it
        record.update(attribution=None, first_stage_over=None)
        record.setdefault("facts", {})["attribution"] = f"unavailable: attribution failed: {first_line(exc)}"
    record["attribution_seconds"] = round(time.perf_counter() - start, 6)
