"""`normdiff fuzz` through the real command line, with real TVM and ExecuTorch.

The slow tests find the two seed bug families (apache/tvm#20909 on
tvm-decompose, pytorch/executorch#24428 on executorch-recompose) with a fixed
seed and a small budget; a path that aborts its process shows that a crash is
one failure and the search goes on; eager on benign float32 finds nothing.
"""
from __future__ import annotations

import json

import pytest
from crashy_paths import ABORT_ROW

from harness.spec import CaseSpec

ABORT_PATH = "abort-on-long-rows"
ABORT_ENV = {"NORMDIFF_EXTRA_PATHS": f"{ABORT_PATH}=tests.crashy_paths:AbortOnLongRows"}


def _fuzz(cli, tmp_path, *args, env=None):
    out = tmp_path / "out"
    result = cli("fuzz", "--out", str(out), "--database", str(tmp_path / "db"), "--seed", "0", *args, env=env)
    summary = json.loads((out / "fuzz.json").read_text()) if (out / "fuzz.json").exists() else None
    return result, out, summary


def _finding(summary, signature):
    found = {f["signature"]: f for f in summary["findings"]}
    assert signature in found, sorted(found)
    return found[signature]


def _no_traceback(result):
    assert "Traceback" not in result.stderr, result.stderr


# -- usage ------------------------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["--paths", "nope"], "--paths: unknown path 'nope'"),
    (["--max-examples", "0"], "--max-examples: must be >= 1"),
    (["--max-examples", "5", "--minutes", "1"], "not allowed with argument"),
    (["--minutes", "-1"], "--minutes: must be > 0"),
    (["--dtypes", "float64"], "dtypes: unknown value 'float64'"),
    (["--inputs", "weird"], "unknown input kind or group 'weird'"),
    (["--patterns", "layer_norm", "--styles", "qwen"], "no style of layer_norm among qwen"),
    (["--max-examples", "many"], "invalid int value"),
])
def test_bad_usage_is_one_line_and_exit_2(capsys, tmp_path, args, message):
    from harness.commands.main import main

    assert main(["fuzz", "--out", str(tmp_path / "out"), *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert not (tmp_path / "out").exists()  # checked before anything is written


def test_bad_usage_through_the_real_command_line(cli, tmp_path):
    result = cli("fuzz", "--out", str(tmp_path / "out"), "--inputs", "benign,nonsense")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "normdiff: error: fuzz: unknown input kind or group 'nonsense'; known: benign, adversarial, all, "
        + ", ".join(__import__("harness.search.strategies", fromlist=["INPUT_ORDER"]).INPUT_ORDER)]


# -- eager: no false alarm -------------------------------------------------------

def test_eager_on_benign_float32_finds_nothing(cli, tmp_path):
    result, out, summary = _fuzz(cli, tmp_path, "--paths", "eager", "--dtypes", "float32",
                                 "--inputs", "benign", "--max-examples", "100")
    _no_traceback(result)
    assert result.returncode == 0, result.stderr
    assert "no failure found" in result.stderr
    assert "examples/min" in result.stderr
    assert summary["findings"] == []
    assert 95 <= summary["search_examples"] <= 100  # the budget was spent (a repeat is not re-run)
    assert summary["settings"]["dtypes"] == ["float32"] and summary["settings"]["inputs"] == ["benign"]
    assert not list((out / "failures").glob("*.json")) if (out / "failures").exists() else True


# -- a crash is a failure, and the search goes on ----------------------------------

CRASH_ARGS = ("--paths", ABORT_PATH, "--patterns", "rms_norm", "--styles", "module", "--dtypes", "float32",
              "--inputs", "benign")


@pytest.fixture(scope="module")
def crash_search(tmp_path_factory):
    """One search of the abort path, its database kept: the crash found and shrunk, and what the next run
    replays (the two tests below, kept on one worker; each search and shrink of a crash costs a worker's
    restart per example)."""
    from helpers import normdiff

    folder = tmp_path_factory.mktemp("crash")
    result, out, summary = _fuzz(normdiff, folder, *CRASH_ARGS, "--max-examples", "40", env=ABORT_ENV)
    return folder, result, out, summary


@pytest.mark.xdist_group("crash_search")  # its module fixture once, on one worker
def test_a_crash_is_one_failure_shrunk_to_its_threshold_and_the_search_goes_on(crash_search):
    _, result, out, summary = crash_search
    _no_traceback(result)
    assert result.returncode == 1, result.stderr
    assert [f["signature"] for f in summary["findings"]] == [f"{ABORT_PATH}.crash.rms_norm.module.float32"]
    f = summary["findings"][0]
    assert f["confirmed"] and f["shrink_complete"]
    assert f["record"]["verdict"] == "crash" and f["record"]["signal"] == "SIGABRT"
    assert f["eager_verdict"] == "pass"
    # shrunk to exactly the row where the crash starts, everything else at its simplest
    spec = CaseSpec.from_json((out / "failures" / f"{ABORT_PATH}.crash.rms_norm.module.float32.json").read_text())
    assert spec.shape == (ABORT_ROW,)
    assert spec.input_dict == {"kind": "normal", "mean": 0.0, "std": 1.0}
    assert spec.seed == 0 and spec.params_dict == {"kind": "ones"}
    # the search went on after the crash, to the end of its budget
    assert f["found_after_examples"] < summary["search_examples"]
    assert summary["search_examples"] >= 36
    assert f"normdiff repro {out}/failures/{ABORT_PATH}.crash.rms_norm.module.float32.json --path {ABORT_PATH}" \
        in result.stderr


def test_programs_run_in_batches_and_a_crash_in_one_is_its_own_finding(cli, tmp_path):
    """--programs draws several inputs per structure: one map per batch, a crash mid-batch is one record
    (the lane's next worker runs the rest), and the finding shrinks to the canonical program at the
    threshold row, alone out of its batch."""
    result, out, summary = _fuzz(cli, tmp_path, "--programs", "--paths", ABORT_PATH, "--styles", "qwen",
                                 "--dtypes", "float32", "--inputs", "benign", "--max-examples", "40",
                                 "--searches", "1", env=ABORT_ENV)
    _no_traceback(result)
    assert result.returncode == 1, result.stderr
    (f,) = summary["findings"]
    assert f["signature"] == f"{ABORT_PATH}.crash.rms_norm.program.qwen" and f["confirmed"] and f["shrink_complete"]
    spec = CaseSpec.from_json((out / "failures" / f"{f['signature']}.json").read_text())
    assert spec.shape == (2, ABORT_ROW) and spec.input_dict["kind"] == "normal"
    assert summary["search_examples"] == 40  # the budget cuts the last batch to fit
    assert summary["structures"] < summary["search_examples"] + summary["shrink_examples"]


@pytest.mark.xdist_group("crash_search")  # its module fixture once, on one worker
def test_the_next_run_starts_from_what_was_found(cli, crash_search, tmp_path):
    """The database keeps each minimal failure: the next run re-checks it first, without search or shrink
    (the first run is the search above, its database copied here: this test's run writes only into tmp_path)."""
    import shutil

    folder, first, out, _ = crash_search
    assert first.returncode == 1, first.stderr
    spec_file = out / "failures" / f"{ABORT_PATH}.crash.rms_norm.module.float32.json"
    shrunk = spec_file.read_text()
    shutil.copytree(folder / "db", tmp_path / "db")

    second, out, summary = _fuzz(cli, tmp_path, *CRASH_ARGS, "--max-examples", "12", "--max-failures", "1",
                                 env=ABORT_ENV)
    _no_traceback(second)
    assert second.returncode == 1, second.stderr
    assert "still fails (from the database)" in second.stderr
    f = _finding(summary, f"{ABORT_PATH}.crash.rms_norm.module.float32")
    assert f["replayed"] and f["found_after_examples"] == 0 and f["shrink_examples"] == 0
    assert summary["search_examples"] == 0 and summary["replay_examples"] == 1
    assert (out / "failures" / spec_file.name).read_text() == shrunk  # the same bytes


STORAGE_PATH = "float16-storage"  # every float32 output stored through float16: a finding on every style, no crash
STORAGE_ENV = {"NORMDIFF_EXTRA_PATHS": f"{STORAGE_PATH}=tests.plugin_paths:Float16StoragePath"}


def test_the_same_seed_gives_the_same_search(cli, tmp_path):
    """Two searches of one seed draw, find and shrink alike (seven findings, their shrinks included). On a path
    that errs without crashing: a crash costs a worker's restart per example (69 s of make test with the abort
    path; the crash's own search and shrink are the next test's)."""
    args = ("--paths", STORAGE_PATH, "--patterns", "layer_norm,rms_norm", "--dtypes", "float32",
            "--inputs", "benign", "--max-examples", "15", "--seed", "9", "--database", "none")
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        result = cli("fuzz", "--out", str(out), *args, env=STORAGE_ENV)
        assert result.returncode == 1, result.stderr
        summary = json.loads((out / "fuzz.json").read_text())
        files = {p.name: p.read_bytes() for p in sorted((out / "failures").glob("*.json"))}
        runs.append(([(f["signature"], f["case_id"], f["shrink_examples"]) for f in summary["findings"]],
                     summary["search_examples"], files))
    assert runs[0] == runs[1]
    assert len(runs[0][0]) >= 2 and any(shrinks for _, _, shrinks in runs[0][0])  # found and shrunk: something to compare


# -- the seed bug families, with the real libraries ----------------------------------

@pytest.mark.slow
def test_tvm_decompose_float16_layer_norm_is_found_and_shrunk(cli, tmp_path):
    result, out, summary = _fuzz(cli, tmp_path, "--paths", "tvm-decompose", "--patterns", "layer_norm",
                                 "--styles", "module", "--dtypes", "float16", "--max-examples", "20",
                                 "--max-failures", "1")
    _no_traceback(result)
    assert result.returncode == 1, result.stderr
    f = _finding(summary, "tvm-decompose.inaccurate.layer_norm.module.float16")
    assert f["confirmed"] and f["eager_verdict"] == "pass"
    spec = CaseSpec.from_json(open(f["file"]).read())
    assert spec.shape[-1] <= 4096
    assert spec.input_dict["kind"] in ("normal", "uniform", "constant", "alternating")
    assert f["record"]["max_err_over_tol"] > 1.0
    assert "examples/min" in result.stderr
    assert "tvm-decompose  inaccurate  layer_norm  module  float16" in result.stderr  # the table


@pytest.mark.slow
def test_executorch_recompose_dtype_mismatch_is_found(cli, tmp_path):
    result, out, summary = _fuzz(cli, tmp_path, "--paths", "executorch-recompose", "--patterns", "rms_norm",
                                 "--max-examples", "10", "--max-failures", "1")
    _no_traceback(result)
    assert result.returncode == 1, result.stderr
    (f,) = summary["findings"]
    assert f["verdict"] == "dtype_mismatch" and f["path"] == "executorch-recompose"
    assert f["confirmed"] and f["eager_verdict"] == "pass"
    assert f["record"]["out_dtype"] == "float32" and f["record"]["expected_dtype"] == f["dtype"]
    assert f["dtype"] in ("float16", "bfloat16") and f["style"] in ("qwen", "llama", "t5")
    spec = CaseSpec.from_json(open(f["file"]).read())
    assert spec.shape == (1,)  # the dtype is wrong whatever the size: shrunk to one element
