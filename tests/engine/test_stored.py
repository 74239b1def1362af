"""What the cache keeps besides artifacts: a deterministic failure comes back as itself, one that may come
from the moment is never kept, and an attribution comes back as the record keys it set."""
import numpy as np
import pytest

from harness.core.records import Record
from harness.core.verdicts import Verdict
from harness.engine import stored
from harness.paths.base import StageError, Unsupported


def test_an_unsupported_case_and_a_compile_error_come_back_as_themselves():
    back = stored.failure_of(stored.failure_bytes(Unsupported("no bfloat16 kernel for Mul")))
    assert isinstance(back, Unsupported) and str(back) == "no bfloat16 kernel for Mul"
    back = stored.failure_of(stored.failure_bytes(StageError("compile", "Literal value 65536 exceeds")))
    assert isinstance(back, StageError) and (back.stage, back.message) == ("compile", "Literal value 65536 exceeds")


@pytest.mark.parametrize("message", ["MemoryError: ", "std::bad_alloc", "Unable to allocate 3.2 GiB",
                                     "OSError: [Errno 28] No space left on device", "Too many open files"])
def test_a_failure_that_looks_like_the_machines_is_not_kept(message):
    assert stored.failure_bytes(StageError("compile", message)) is None
    assert stored.failure_bytes(ValueError("a harness bug is not a path's failure")) is None


def test_an_entry_that_is_not_a_kept_failure_raises():
    with pytest.raises(Exception):
        stored.failure_of(b'{"kind": "pass"}')


def test_an_attribution_comes_back_as_the_keys_it_set():
    record = Record.from_dict({
        "case_id": "c1", "case": {}, "path": "tvm", "verdict": "dtype_mismatch",
        "facts": {"rms_norm_built": True, "attribution": "read"},
        "attribution": [{"stage": "return:mul", "dtype": "float32", "max_err_over_tol": None}],
        "first_stage_over": "return:mul", "attribution_note": "interpreted", "attribution_seconds": 1.5})
    again = Record("c1", {}, "tvm", verdict=Verdict.DTYPE_MISMATCH, facts={"rms_norm_built": True})
    back = stored.apply_attribution(again, stored.attribution_bytes(record))
    assert again.attribution is None and "attribution" not in again.facts  # a new record, this one unchanged
    assert dict(back) == {k: v for k, v in record.items() if k != "attribution_seconds"}


def test_the_output_digest_tells_dtype_shape_and_bits_apart():
    a = np.arange(6, dtype=np.float16)
    digests = {stored.output_digest(x) for x in (a, a.astype(np.float32), a.reshape(2, 3), a + 1)}
    assert len(digests) == 4 and stored.output_digest(a.copy()) in digests
