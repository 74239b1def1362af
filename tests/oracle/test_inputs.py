"""Inputs and parameters: drawn in float64, rounded, bit-identical everywhere."""
import hashlib
import subprocess
import sys

import ml_dtypes
import numpy as np

from harness.oracle.inputs import make_inputs
from harness.spec import CaseSpec


def digest(inputs) -> str:
    h = hashlib.sha256(inputs.x.tobytes())
    for k in sorted(inputs.params):
        h.update(k.encode() + inputs.params[k].tobytes())
    return h.hexdigest()[:16]


SPEC = CaseSpec.from_dict({"pattern": "rms_norm", "style": "qwen", "dtype": "bfloat16", "shape": [2, 8, 64],
                           "params": {"kind": "normal"}, "seed": 3})


def test_inputs_are_rounded_to_the_case_dtypes():
    inputs = make_inputs(SPEC)
    assert inputs.x.dtype == np.dtype(ml_dtypes.bfloat16) and inputs.x.shape == (2, 8, 64)
    assert inputs.params["weight"].dtype == np.dtype(ml_dtypes.bfloat16)
    mixed = make_inputs(SPEC.replace(weight_dtype="float32"))
    assert mixed.params["weight"].dtype == np.float32


def test_same_spec_same_bytes_in_another_process():
    code = ("from harness.oracle.inputs import make_inputs; from harness.spec import CaseSpec; "
            "from tests.oracle.test_inputs import SPEC, digest; print(digest(make_inputs(SPEC)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == digest(make_inputs(SPEC))
    assert digest(make_inputs(SPEC.replace(seed=4))) != digest(make_inputs(SPEC))


def test_golden_bytes_do_not_drift():
    # If NumPy ever changes its PCG64 normal stream, every recorded case changes: fail loudly.
    x = make_inputs(CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [4]})).x
    assert x.tolist() == [0.1257302165031433, -0.13210485875606537, 0.6404226422309875, 0.10490011423826218]


def test_alternating_is_minus_plus_around_the_offset():
    x = make_inputs(CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [1, 6],
                                        "input": {"kind": "alternating", "amplitude": 0.25, "offset": 2}})).x
    assert x.astype(float).tolist() == [[1.75, 2.25, 1.75, 2.25, 1.75, 2.25]]
