"""The ground truth: materially wrong outputs, decided without the oracle under test."""
import numpy as np

from harness.benchmark import truth
from harness.core.dtypes import cast, ulp


def test_ground_truth_counts_dtype_nonfinite_and_errors_far_beyond_the_correct_ones(spec, ref_of):
    s = spec(dtype="float32")
    ref = ref_of(s)
    good = cast(ref.out, "float32")
    base = truth.baseline_rows([good], ref)
    assert truth.judge(good.astype(np.float16), ref, "float32", base) == truth.Truth(True, "dtype_mismatch")
    nan = good.copy()
    nan[0, 0] = np.nan
    assert truth.judge(nan, ref, "float32", base).reason == "nonfinite"
    # the row's largest value 3 ULPs off, where the known-good output is at most half an ULP off
    # anywhere on the row: materially wrong
    j = int(np.argmax(np.abs(ref.out[1])))
    off = good.astype(np.float64)
    off[1, j] += 3 * ulp(off[1, j], "float32")
    assert truth.judge(cast(off, "float32"), ref, "float32", base) == truth.Truth(True, "inaccurate")
    # where a known-good output is itself one ULP off everywhere, an output one ULP off is not wrong
    up = np.nextafter(good, np.float32(np.inf))
    one = good.astype(np.float64)
    one[1, j] += ulp(one[1, j], "float32")
    assert not truth.judge(cast(one, "float32"), ref, "float32", truth.baseline_rows([good, up], ref)).wrong


def test_ground_truth_leaves_out_what_a_correct_implementation_does_as_badly(spec, ref_of):
    s = spec(dtype="float32")
    ref = ref_of(s)
    sloppy = cast(ref.out * (1 + 1e-5), "float32")  # a correct implementation this far off everywhere
    base = truth.baseline_rows([sloppy], ref)
    assert not truth.judge(cast(ref.out * (1 + 3e-5), "float32"), ref, "float32", base).wrong
    assert truth.judge(cast(ref.out * (1 + 1e-4), "float32"), ref, "float32", base).wrong


def test_ground_truth_leaves_out_a_nonfinite_row_the_correct_outputs_share(spec, ref_of):
    s = spec(dtype="float32")
    ref = ref_of(s)
    good = cast(ref.out, "float32")
    shared = good.copy()
    shared[1, :] = np.nan  # eager (or a correct implementation) is NaN on row 1 as well
    nan = good.copy()
    nan[1, 3] = np.nan
    assert not truth.judge(nan, ref, "float32", truth.baseline_rows([good, shared], ref)).wrong
    assert truth.judge(nan, ref, "float32", truth.baseline_rows([good], ref)).reason == "nonfinite"
