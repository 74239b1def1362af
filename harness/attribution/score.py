"""Program stages against a capture: the attribution entries and the first stage over its bound."""
from __future__ import annotations

import math

import numpy as np

from harness.attribution.match import align, canonical, err_over_bound
from harness.core.verdicts import Verdict
from harness.paths.base import Capture


def _same_bits(a, b) -> bool:
    """Whether `a` has exactly `b`'s bits: arrays, or tuples of them (a model of several outputs)."""
    if a is None:
        return False
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(_same_bits(x, y) for x, y in zip(a, b)))
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()


def changes_of(capture: Capture, out: np.ndarray) -> list[str]:
    """What makes this attribution approximate: the reader's known changes, and a re-run that differs."""
    changes = list(capture.changes)
    if not _same_bits(capture.rerun_output, out):
        rerun = capture.rerun_output
        if isinstance(out, tuple) or isinstance(rerun, tuple):  # several outputs: the first that differs
            pairs = list(zip(rerun, out)) if isinstance(rerun, tuple) and isinstance(out, tuple) else []
            k = next((k for k, (a, b) in enumerate(pairs) if not _same_bits(a, b)), None)
            if k is None or len(rerun) != len(out):
                changes.append("the re-run with its intermediates exposed gave no outputs like the path's")
                return changes
            rerun, out = rerun[k], out[k]
        if rerun is None or np.shape(rerun) != np.shape(out):
            changes.append("the re-run with its intermediates exposed gave no output like the path's")
        else:
            differ = int(np.count_nonzero(np.asarray(rerun).astype(np.float64) != np.asarray(out).astype(np.float64)))
            changes.append(f"the re-run's output ({np.asarray(rerun).dtype}) differs from the path's "
                           f"({np.asarray(out).dtype}) in {differ} of {np.size(out)} elements")
    return changes


def returned(capture: Capture) -> list[int | None]:
    """The index among the intermediates of each output the graph returns, in order (one output: [output]).

    A reader names the first (Capture.output); another output, or the first
    where the reader names none (TVM's main returns a tuple of them), is the
    last intermediate with exactly the bits the re-run returned for it (every
    reader has each returned value among its intermediates: FX and Relax
    every node, OpenVINO each Result's). An intermediate with the same bits
    computes the same value, so its error over the bound is the output's.
    """
    outs = capture.rerun_output
    if not isinstance(outs, tuple):
        return [capture.output]
    inters = capture.intermediates

    def bits(out):
        return next((i for i in range(len(inters) - 1, -1, -1) if _same_bits(inters[i].value, out)), None)

    return [bits(out) if k or capture.output is None else capture.output for k, out in enumerate(outs)]


def entries(stages, capture: Capture, approximate: bool) -> list[dict]:
    """One entry per program stage in program order (a norm's part only where the graph computed it).

    A program of several outputs anchors the stage of each output (ProgramStage.returns) to the value the graph
    returns for it; one output, its last stage to the graph's output (match.align).
    """
    inters = capture.intermediates
    outputs = returned(capture)
    keep = [i for i, it in enumerate(inters) if canonical(it.op) is not None or i in outputs]
    candidates = [(canonical(inters[i].op) or "layout", inters[i].value) for i in keep]
    output = keep.index(capture.output) if capture.output in keep else None
    anchors = None
    if any(s.returns is not None for s in stages):
        anchors = {k: keep.index(outputs[s.returns]) for k, s in enumerate(stages)
                   if s.returns is not None and s.returns < len(outputs) and outputs[s.returns] is not None}
    pairs = align([(s.op, s.value) for s in stages], candidates, output, anchors)
    out = []
    for k, s in enumerate(stages):
        inter = inters[keep[pairs[k]]] if k in pairs else None
        if inter is None and s.part:
            continue
        ratio = err_over_bound(s.value, s.err, inter.value) if inter is not None else None
        out.append({
            "stage": s.label, "op": s.op, "dtype": inter.dtype if inter is not None else None,
            "max_err_over_tol": ratio if ratio is None or math.isfinite(ratio) else None,
            "over": ratio is not None and ratio > 1.0, "program_dtype": s.dtype,
            "node": f"{inter.name} = {inter.op}" if inter is not None else None, "approximate": approximate,
        })
    return out


def first_stage_over(attribution: list[dict], verdict: Verdict) -> str | None:
    """dtype_mismatch: the first computed stage whose dtype differs from the program's; else the first over its bound."""
    for e in attribution:
        if verdict == Verdict.DTYPE_MISMATCH:
            if e["dtype"] is not None and e["dtype"] != e["program_dtype"]:
                return e["stage"]
        elif e["over"]:
            return e["stage"]
    return None
