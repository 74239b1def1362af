"""One execution of a case of several outputs: every path returns every output, each is scored, the worst sets
the verdict, and the record round-trips through its JSON."""
import json

import pytest

from harness import paths
from harness.core.records import Record, dumps
from harness.core.verdicts import SCORED, Verdict, worst

# vLLM's fused residual add + RMSNorm (tests/user_norms.py): forward(x, residual) -> (normed, x + residual), the sum
# kept in float32 for the statistic (vllm-project/vllm#52104's native path).
FUSED_MODULE = {"class": "user_norms:FusedAddRMSNorm", "init": {"hidden_size": 64}, "shape": [4, 64],
                "dtype": "float16", "params": {"kind": "normal"}, "inputs": {"residual": {"kind": "normal"}}}
FUSED_PROGRAM = {"pattern": "rms_norm", "dtype": "bfloat16", "shape": [4, 64], "params": {"kind": "normal"},
                 "inputs": {"r": {"kind": "normal"}},
                 "program": "h = x.float() + r.float()\nv = h.pow(2).mean(-1, keepdim=True)\n"
                            "normed = (h * torch.rsqrt(v + eps)).to(x.dtype) * w\nreturn normed, h.to(x.dtype)"}


def round_trips(record: Record) -> bool:
    return Record.from_dict(json.loads(dumps(record))) == record


@pytest.mark.parametrize("path", paths.names())
def test_a_module_returning_two_tensors_gets_two_scores_on_every_path_and_the_worse_verdict(execute_cached, path):
    record = execute_cached(FUSED_MODULE, path)
    assert record.lift is not None and record.lift.lift_check < 1e-12  # each output checked against the module's
    assert [s.name for s in record.scores] == ["0", "1"], record.message  # named by position in the forward
    verdicts = [s.verdict for s in record.scores]
    assert record.verdict == min(verdicts, key=SCORED.index)  # the worse of the two
    assert record.verdict_output == record.scores[worst(record.scores)].name and record.score.verdict == record.verdict
    assert record.to_dict()["verdict_output"] == record.verdict_output and len(record.to_dict()["outputs"]) == 2
    if path.startswith("executorch-recompose"):  # the rebuilt float32 norm: the normalized output only
        assert verdicts == [Verdict.DTYPE_MISMATCH, Verdict.PASS] and record.verdict_output == "0"
        assert record.message.startswith("output 0: output dtype float32")
    elif path == "eager":
        assert verdicts == [Verdict.PASS, Verdict.PASS]
    assert round_trips(record)


def test_a_program_returning_two_values_round_trips_through_its_record(execute_cached):
    for path, verdicts in (("eager", ["pass", "pass"]), ("executorch-recompose", ["dtype_mismatch", "pass"])):
        record = execute_cached(FUSED_PROGRAM, path)
        d = record.to_dict()
        assert [(o["name"], o["verdict"]) for o in d["outputs"]] == list(zip(("normed", "1"), verdicts))
        assert d["verdict"] == verdicts[0] and d["verdict_output"] == "normed"
        assert d["max_err_over_tol"] == d["outputs"][0]["max_err_over_tol"]  # the verdict's output, flat
        back = Record.from_dict(json.loads(dumps(record)))
        assert back == record and back.verdict_output == "normed" and back.scores == record.scores
