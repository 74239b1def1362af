"""A results file written before the typed Record (commit 2a754ea) reads, merges, reports and gates unchanged.

The folder records_2a754ea/ holds what that commit wrote: results.jsonl (a
scalar case on eager/tvm/tvm-decompose with an attributed failure, a module
case with its lift facts, a crashing class and a class whose lift is not
trusted), the baseline it made from part of them, and the reports and gate
output it printed for them, with the output folder written as <OUT> (merged
from a folder without a reports/baseline.json, so the repository's baseline
of the day does not enter them).
"""
import json
import os
import shutil

import pytest

from harness.commands.main import main
from harness.core.records import Record, ResultsWriter, read_results
from harness.core.verdicts import Verdict

OLD = os.path.join(os.path.dirname(__file__), "records_2a754ea")


def fixture_text(folder: str, name: str) -> str:
    """A file of a results fixture written by an earlier commit (records_2a754ea/, records_45b5a2d/)."""
    with open(os.path.join(folder, name), encoding="utf-8") as fh:
        return fh.read()


def old(name: str) -> str:
    return fixture_text(OLD, name)


def test_old_results_round_trip_byte_for_byte_through_the_typed_record(tmp_path):
    records = [Record.from_dict(d) for d in read_results(os.path.join(OLD, "results.jsonl"))]
    assert len(records) == 12 and not any(r.extra for r in records)  # every key of the old format is typed
    assert {r.verdict for r in records} == {Verdict.PASS, Verdict.INACCURATE, Verdict.DTYPE_MISMATCH,
                                            Verdict.CRASH, Verdict.ERROR}
    assert sum(r.lift is not None for r in records) == 7 and sum(r.attribution is not None for r in records) == 2
    out = tmp_path / "results.jsonl"
    with ResultsWriter(str(out)) as writer:
        for record in records:
            writer.write(record)
    assert out.read_text() == old("results.jsonl")
    first = json.loads(old("results.jsonl").splitlines()[0])
    assert list(first) == list(json.loads(out.read_text().splitlines()[0]))  # the keys' order too


def test_old_results_merge_into_the_same_reports(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no reports/baseline.json here: the reports mark no known failure, as then
    shutil.copy(os.path.join(OLD, "results.jsonl"), tmp_path / "in.jsonl")
    (tmp_path / "in").mkdir()
    shutil.move(tmp_path / "in.jsonl", tmp_path / "in" / "results.jsonl")
    out = tmp_path / "merged"
    assert main(["merge", str(tmp_path / "in"), "--out", str(out), "--no-history"]) == 0
    for name in ("summary.md", "junit.xml", "report.html"):
        assert (out / name).read_text().replace(str(out), "<OUT>") == old(name), name
    assert (out / "results.jsonl").read_text() == old("results.jsonl")


@pytest.mark.parametrize("verbose", [False, True])
def test_old_results_gate_the_same(tmp_path, capsys, verbose):
    baseline = tmp_path / "baseline.json"
    shutil.copy(os.path.join(OLD, "baseline.json"), baseline)
    results = tmp_path / "merged" / "results.jsonl"
    results.parent.mkdir()
    shutil.copy(os.path.join(OLD, "results.jsonl"), results)
    code = main(["gate", "--baseline", str(baseline), *(["--verbose"] if verbose else []), str(results.parent)])
    captured = capsys.readouterr()
    assert code == 1  # four failures the baseline does not expect
    if verbose:
        assert (captured.out + captured.err).replace(str(results.parent), "<OUT>") == old("gate-verbose.out")
    else:
        assert captured.out == old("gate.stdout")
        assert captured.err == old("gate.stderr")


# -- a results file written at 45b5a2d, the head before several outputs: a case of one output keeps its bytes ----
# records_45b5a2d/ holds what 45b5a2d wrote for the five cases above on eager, tvm, tvm-decompose, onnxruntime and
# executorch-recompose (`run --jobs 1`, then `merge` from a folder without a baseline), a baseline `gate --update`
# made of them less three entries, and what its `gate` printed.
HEAD = os.path.join(os.path.dirname(__file__), "records_45b5a2d")


def head(name: str) -> str:
    return fixture_text(HEAD, name)


def test_results_of_the_head_before_several_outputs_round_trip_byte_for_byte(tmp_path):
    records = [Record.from_dict(d) for d in read_results(os.path.join(HEAD, "results.jsonl"))]
    assert len(records) == 25 and not any(r.extra for r in records)
    assert all(len(r.scores) <= 1 and r.verdict_output is None for r in records)
    out = tmp_path / "results.jsonl"
    with ResultsWriter(str(out)) as writer:
        for record in records:
            writer.write(record)
    assert out.read_text() == head("results.jsonl")


def test_results_of_the_head_before_several_outputs_merge_and_gate_the_same(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    shutil.copy(os.path.join(HEAD, "results.jsonl"), tmp_path / "in" / "results.jsonl")
    out = tmp_path / "merged"
    assert main(["merge", "in", "--out", "merged", "--no-history"]) == 0  # relative, as the file was made
    assert (out / "summary.md").read_text() == head("summary.md")
    assert (out / "results.jsonl").read_text() == head("results.jsonl")
    capsys.readouterr()
    baseline = os.path.join(HEAD, "baseline.json")
    assert main(["gate", "--baseline", baseline, str(out)]) == 1  # the three entries left out
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (head("gate.stdout"), head("gate.stderr"))
    assert main(["gate", "--baseline", baseline, "--verbose", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out + captured.err == head("gate-verbose.out")


def cpu_features_list():
    from harness.core.machine import cpu_features

    features = cpu_features()
    return None if features is None else list(features)


@pytest.mark.parametrize("case_id, path", [("052c6ae297e3", "eager"), ("0b30347c55e0", "eager"),
                                           ("d0bd5c2ba5cd", "eager"), ("d0bd5c2ba5cd", "executorch-recompose")])
def test_a_case_of_one_output_executes_to_the_record_the_head_before_several_outputs_wrote(execute_cached, case_id,
                                                                                          path):
    from harness.engine.execute import comparable

    old_record = next(r for r in read_results(os.path.join(HEAD, "results.jsonl"))
                      if (r["case_id"], r["path"]) == (case_id, path))
    record = execute_cached(old_record["case"], path)
    # `cpu` is the machine's (the fixture's had no avx512_fp16); everything else is the version's
    assert record["cpu"] == cpu_features_list()
    assert {**comparable(record), "cpu": None} == {**comparable(old_record), "cpu": None}
    assert list(record.to_dict()) == list(old_record)  # every key, in the same order
