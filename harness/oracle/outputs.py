"""The outputs of a case of several (`return y, r`, a forward returning a tuple): each scored on its own, and the
one that sets the execution's verdict.

Each output is held to its own FP64 reference, bound and witnesses (`Reference.each`) and to eager's matching
output by harness.oracle.compare.score, unchanged; an output the path did not return is a shape_mismatch. The
execution's verdict is that of the worst output by the verdicts' precedence (docs/contracts.md §3), so a case of
one output scores exactly as it always has.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from harness.core.dtypes import name_of
from harness.core.verdicts import Verdict, worst
from harness.oracle.compare import Score, as_outputs, score
from harness.oracle.reference import Reference


def score_each(out, ref: Reference, eager_out=None) -> tuple[Score, ...]:
    """Each output of `out` (an array, or a tuple of them) scored against its own reference (`ref.each`) and
    eager's matching output, named by its reference's name when there are several; an output the path did not
    return is a shape_mismatch."""
    refs, outs = ref.each, as_outputs(out)
    eagers = as_outputs(eager_out) if eager_out is not None else (None,) * len(refs)
    if len(refs) == 1 and len(outs) == 1:
        return (score(outs[0], refs[0], eagers[0]),)
    names = ref.output_names
    scores = []
    for k, (r, name) in enumerate(zip(refs, names)):
        e = eagers[k] if k < len(eagers) else None
        if k >= len(outs):
            scores.append(Score(Verdict.SHAPE_MISMATCH, f"output {name} missing: the path returned {len(outs)} "
                                f"outputs, the case has {len(refs)}", None, None, None, None, None, None,
                                r.out_dtype if e is None else name_of(e.dtype), name=name))
            continue
        scores.append(replace(score(outs[k], r, e), name=name))
    if len(outs) > len(refs):
        k = worst(scores)
        scores[k] = replace(scores[k], verdict=Verdict.SHAPE_MISMATCH, message=(
            f"the path returned {len(outs)} outputs, the case has {len(refs)}; {scores[k].message}"))
    return tuple(scores)
