"""The attribution of a failing execution: the record's `attribution`, `first_stage_over` and a fact.

`annotate(record, spec, path, inputs, out)` is the engine's one call: the
record with its Attribution; it never raises (a failure to attribute is a
fact, never a lost record).
"""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import replace

from harness.attribution.score import changes_of, entries, first_stage_over
from harness.attribution.stages import program_stages
from harness.core.records import Attribution, Record
from harness.core.verdicts import Verdict
from harness.paths.base import IntermediatesUnavailable, first_line, input_arrays

# The verdicts whose executions get an attribution: the path ran and its output is wrong in value or dtype.
ATTRIBUTED = frozenset({Verdict.INACCURATE, Verdict.DTYPE_MISMATCH, Verdict.NONFINITE})
CAPTURES = {"count": 0, "builds": 0}  # re-runs and rebuilds in this process (passing executions make none)
# Rebuilt graphs by (path, structure key), as the Executor keeps artifacts: failing cases that differ
# only in their input reuse one (a TVM rebuild is a compile). The last few structures are kept.
_BUILT: OrderedDict = OrderedDict()
BUILT_SIZE = 8


def _runner(path, spec, inputs, module_case=None, backward=None):
    """run(x) -> Capture: the path's graph of (path, structure) with its intermediates exposed, built once.

    The path builds it (`Path.intermediates`, docs/contracts.md §6); one that cannot
    raises IntermediatesUnavailable, and the record says why. A gradient case's graph is its Backward module's
    (`backward`: stages.BackwardCase), as the path's `prepare` got it.
    """
    from harness.core.tensors import to_torch
    from harness.oracle.modules import build_module

    key = (path.name, path.structure_key(spec))
    if key in _BUILT:
        _BUILT.move_to_end(key)
        return _BUILT[key]
    if backward is not None:  # a gradient case: the Backward module, its example the inputs then the cotangents
        module, example = backward.built
    elif module_case is not None:  # a module case: the user's class, built as every path gets it
        module, example = module_case.build(), module_case.example(inputs, spec.layout)
    else:
        tensors = tuple(to_torch(a, spec.layout) for a in input_arrays(inputs.run_arg))
        example = tensors if inputs.extra else tensors[0]  # as `prepare` gets it
        module = build_module(spec, inputs.params)
    _BUILT[key] = path.intermediates(spec, module, example)
    CAPTURES["builds"] += 1
    while len(_BUILT) > BUILT_SIZE:
        _BUILT.popitem(last=False)
    return _BUILT[key]


def attribute(spec, path, inputs, out, verdict: Verdict, module_case=None, backward=None) -> Attribution:
    """The stages of the path's graph scored; IntermediatesUnavailable if it cannot be done. A gradient case's
    stages are its lifted backward's (`backward`: stages.BackwardCase), its graph its Backward module's."""
    stages = program_stages(spec, inputs, module_case, backward)
    runner = _runner(path, spec, inputs, module_case, backward)
    CAPTURES["count"] += 1
    capture = runner(inputs.run_arg)
    changes = changes_of(capture, out)
    attribution = entries(stages, capture, approximate=bool(changes))
    note = capture.method + ("; approximate: " + "; ".join(changes) if changes else
                             "; the re-run's output is bit-identical to the path's")
    return Attribution(attribution, first_stage_over(attribution, verdict), note)


def annotate(record: Record, spec, path, inputs, out, module_case=None, backward=None) -> Record:
    """`record` with its attribution, if it is a failing one (as it is for other verdicts); `backward` (a
    stages.BackwardCase) for a gradient case."""
    if record.verdict not in ATTRIBUTED:
        return record
    start = time.perf_counter()
    try:
        found, fact = attribute(spec, path, inputs, out, record.verdict, module_case, backward), "read"
    except IntermediatesUnavailable as exc:
        found, fact = Attribution(None, None), f"unavailable: {exc}"
    except Exception as exc:  # noqa: BLE001 - attribution is extra: the record stands without it
        found, fact = Attribution(None, None), f"unavailable: attribution failed: {first_line(exc)}"
    found = replace(found, seconds=round(time.perf_counter() - start, 6))
    return replace(record.with_fact("attribution", fact), attribution=found)
