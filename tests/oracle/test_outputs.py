"""Several outputs: each scored against its own reference, the worst by the verdicts' precedence sets the verdict."""
import numpy as np

from harness.core.dtypes import cast
from harness.oracle import outputs
from harness.oracle.inputs import make_inputs
from harness.oracle.reference import reference
from harness.spec import CaseSpec


FUSED_ADD = {"pattern": "rms_norm", "dtype": "bfloat16", "shape": [4, 256], "params": {"kind": "normal"},
             "inputs": {"r": {"kind": "normal"}},
             "program": "h = x.float() + r.float()\nv = h.pow(2).mean(-1, keepdim=True)\n"
                        "normed = (h * torch.rsqrt(v + eps)).to(x.dtype) * w\nreturn normed, h.to(x.dtype)"}


def test_each_output_is_scored_on_its_own_and_the_worst_sets_the_verdict():
    spec = CaseSpec.from_dict(FUSED_ADD)
    ref = reference(spec, make_inputs(spec))
    assert ref.output_names == ("normed", "1") and len(ref.each) == 2
    good = tuple(cast(r.out, "bfloat16") for r in ref.each)  # each output correctly rounded
    scores = outputs.score_each(good, ref, good)
    assert [s.verdict for s in scores] == ["pass", "pass"] and [s.name for s in scores] == ["normed", "1"]
    # the residual (the second output) 3% off (4 ulp of bfloat16): over its bound, and over 2x eager's error
    residual = cast(ref.each[1].out * (1 + 2.0 ** -5), "bfloat16")
    wrong = (good[0], residual)
    scores = outputs.score_each(wrong, ref, good)
    assert [s.verdict for s in scores] == ["pass", "inaccurate"] and scores[1].max_err_over_tol > 1.0
    assert outputs.worst(scores) == 1  # the inaccurate output sets the verdict, though it comes second
    # an output of the wrong dtype outranks an inaccurate one (the verdicts' precedence)
    scores = outputs.score_each((good[0].astype(np.float32), residual), ref, good)
    assert [s.verdict for s in scores] == ["dtype_mismatch", "inaccurate"] and outputs.worst(scores) == 0
    # a path that drops an output (openvino#37072's SkipLayerNormalization): that output is a shape_mismatch
    scores = outputs.score_each(good[0], ref, good)
    assert [s.verdict for s in scores] == ["pass", "shape_mismatch"] and "output 1 missing" in scores[1].message
