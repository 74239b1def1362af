"""The TVM reader: main rebuilt with every binding as an output, and the repro script reads the same values."""
import pytest
from helpers import assert_same_intermediates, hooked_capture, scripted_intermediates

from harness.spec import CaseSpec

pytest.importorskip("tvm")

MANUAL = {"pattern": "layer_norm", "style": "manual", "dtype": "float16", "shape": [2, 64], "params": {"kind": "normal"}}


@pytest.mark.slow
@pytest.mark.parametrize("path", ["tvm", "tvm-decompose"])
def test_a_tvm_script_reads_the_values_attribution_reads(path):
    spec = CaseSpec.from_dict(MANUAL)
    capture = hooked_capture(spec, path)
    assert capture.intermediates and capture.output is not None
    assert capture.intermediates[capture.output].value.dtype == capture.rerun_output.dtype
    assert_same_intermediates(capture, *scripted_intermediates(spec, path))
