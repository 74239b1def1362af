"""The store of captured inputs: a tensor by the SHA-256 of its bytes, read back bit for bit, found through
NORMDIFF_CAPTURED; a case naming it draws exactly it."""
import hashlib

import ml_dtypes
import numpy as np
import pytest

from harness.core import captured
from harness.oracle.inputs import make_inputs
from harness.spec import CaseSpec


def test_a_tensor_is_stored_by_its_hash_and_read_back_bit_for_bit(tmp_path):
    x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype(ml_dtypes.bfloat16)
    hexd = captured.put(str(tmp_path), x)
    assert hexd == hashlib.sha256(x.tobytes()).hexdigest() == captured.digest(x)
    assert captured.put(str(tmp_path), x) == hexd and len(list(tmp_path.iterdir())) == 1  # once
    back = captured.load(hexd, (2, 3, 8), "bfloat16", [str(tmp_path)])
    assert back.dtype == x.dtype and back.tobytes() == x.tobytes()


def test_a_missing_or_altered_tensor_is_one_line(tmp_path):
    x = np.arange(8, dtype=np.float16)
    hexd = captured.put(str(tmp_path), x)
    with pytest.raises(captured.CapturedMissing, match="is in no store folder"):
        captured.load("0" * 64, (8,), "float16", [str(tmp_path)])
    with pytest.raises(captured.CapturedMissing, match="not the 16 of shape"):
        captured.load(hexd, (16,), "float16", [str(tmp_path)])
    (tmp_path / (hexd + captured.SUFFIX)).write_bytes(b"\0" * 16)
    with pytest.raises(captured.CapturedMissing, match="do not match its hash"):
        captured.load(hexd, (8,), "float16", [str(tmp_path)])


def test_a_case_with_a_captured_input_draws_exactly_the_stored_tensor(tmp_path, monkeypatch):
    monkeypatch.delenv(captured.CAPTURED_ENV, raising=False)
    x = (np.random.default_rng(1).normal(size=(4, 32)) * 1e3).astype(np.float16)  # large: exact, never re-rounded
    captured.use_store(str(tmp_path))
    hexd = captured.put(str(tmp_path), x)
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [4, 32],
                               "input": {"kind": "captured", "sha256": hexd}})
    assert make_inputs(spec).x.tobytes() == x.tobytes()
