"""harness.check: a module case from Python (a notebook, the user's own test) returns its records."""
import pytest

import harness
from harness.core.verdicts import Verdict
from user_norms import GatedRMSNorm, LlamaRMSNorm


def test_a_class_object_runs_on_the_paths_asked_for():
    records = harness.check(GatedRMSNorm, init={"hidden_size": 32}, inputs={"gate": {"kind": "normal"}},
                            dtype="float16", shape=(2, 4, 32), paths=["eager", "executorch"], jobs=1)
    assert [(r["path"], r["verdict"]) for r in sorted(records, key=lambda r: r["path"])] == \
        [("eager", "pass"), ("executorch", "pass")]
    assert all(r["case"]["class"] == "user_norms:GatedRMSNorm" for r in records)


def test_the_seed_bug_on_the_llama_norm_from_python():
    (record,) = harness.check("user_norms:LlamaRMSNorm", init={"hidden_size": 32}, dtype="bfloat16",
                              shape=(2, 32), params={"kind": "normal"}, paths=["executorch-recompose"], jobs=1)
    assert record["verdict"] == "dtype_mismatch" and record["out_dtype"] == "float32"
    assert record.verdict is Verdict.DTYPE_MISMATCH and record.score.out_dtype == "float32"  # typed, and a str


def test_a_bad_class_is_a_value_error_with_the_command_lines_line():
    with pytest.raises(ValueError, match="user_norms has no class 'Nope'"):
        harness.check("user_norms:Nope", paths=["eager"], jobs=1)
    with pytest.raises(ValueError, match="unknown path"):
        harness.check(LlamaRMSNorm, init={"hidden_size": 8}, paths=["nosuch"])


def test_a_failure_is_reduced_on_request_through_the_lifted_program(tmp_path, capsys):
    from harness.core.verdicts import Verdict
    from harness.engine.execute import Executor
    from harness.search.reduce_steps import count_ops
    from harness.spec import CaseSpec

    (record,) = harness.check("user_norms:LlamaRMSNorm", init={"hidden_size": 32}, dtype="bfloat16",
                              shape=(2, 32), params={"kind": "normal"}, paths=["executorch-recompose"], jobs=1,
                              reduce=str(tmp_path))
    assert record["verdict"] == Verdict.DTYPE_MISMATCH
    file = tmp_path / f"reduced-{record['case_id']}-executorch-recompose.json"
    assert f"{record['case_id']} on executorch-recompose: reduced (" in capsys.readouterr().err
    reduced = CaseSpec.from_json(file.read_text())
    assert reduced.style == "program" and count_ops(reduced) >= 1
    executor = Executor()
    assert executor.execute(reduced, "executorch-recompose")["verdict"] == Verdict.DTYPE_MISMATCH
    assert executor.execute(reduced, "eager")["verdict"] == Verdict.PASS


def test_a_whole_models_instances_from_python(tmp_path):
    from user_models import TinyMixer

    result = harness.check_model(TinyMixer, init={"width": 8, "groups": 2}, dtype="float16", shape=(2, 4, 8),
                                 paths=["eager"], out=str(tmp_path), jobs=1)
    assert result.problem is None
    assert [i["path"] for i in result.about["instances"]] == ["norm_in", "group", "norm_out"]
    assert [r["verdict"] for r in result.records] == [Verdict.PASS] * 3
    assert "`norm_out`" in result.table and (tmp_path / "model.json").exists()
    with pytest.raises(ValueError, match="--tokens: give either"):
        harness.check_model(TinyMixer, shape=(2, 4, 8), tokens=4)
