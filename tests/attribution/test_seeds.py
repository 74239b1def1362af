"""The issue's acceptance: the seeds' records and repro scripts name the stage that lost the precision."""
import json
import os
import subprocess
import sys

import pytest
from helpers import seed


def _records(out_dir):
    with open(os.path.join(out_dir, "results.jsonl"), encoding="utf-8") as fh:
        return {r["path"]: r for r in map(json.loads, fh)}


def _script(cli_here, tmp_path, *args):
    script = tmp_path / "r.py"
    proc = cli_here("repro", *args, "-o", str(script))
    assert proc.returncode == 0, proc.stderr
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          cwd=str(tmp_path))


@pytest.mark.slow
def test_tvm_seed_names_the_float16_variance(cli, cli_here, tmp_path):
    proc = cli("run", "--case", seed("tvm-20909.json"), "--paths", "tvm-decompose", "--quiet",
               "--out", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stderr
    r = _records(tmp_path / "out")["tvm-decompose"]
    assert r["verdict"] == "inaccurate"
    assert r["first_stage_over"] == "return:layer_norm.variance"
    by_stage = {e["stage"]: e for e in r["attribution"]}
    variance = by_stage["return:layer_norm.variance"]
    assert variance["dtype"] == "float16" and variance["program_dtype"] == "float32"
    assert variance["over"] and variance["max_err_over_tol"] > 1e3
    assert variance["node"].endswith("relax.variance") and variance["approximate"] is False
    # the mean before it is exact (alternating +-0.25 sums to 0 even in float16); the output is over
    assert by_stage["return:layer_norm.mean"]["max_err_over_tol"] == 0.0
    assert by_stage["return:layer_norm"]["over"]
    assert [e["stage"] for e in r["attribution"]][-1] == "return:layer_norm"
    assert r["facts"]["attribution"] == "read" and "bit-identical" in r["attribution_note"]

    run = _script(cli_here, tmp_path, "tvm-20909")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "first stage over its bound: return:layer_norm.variance (computed in float16" in run.stdout
    table = [line for line in run.stdout.splitlines() if line.startswith("  return:layer_norm.variance")]
    assert table and "float16" in table[0] and "<- over its bound" in table[0]


@pytest.mark.slow
def test_executorch_seed_names_the_first_stage_in_another_dtype(cli, cli_here, tmp_path):
    proc = cli("run", "--case", seed("executorch-24428-qwen-fp16.json"), "--paths", "executorch-recompose",
               "--quiet", "--out", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stderr
    r = _records(tmp_path / "out")["executorch-recompose"]
    assert r["verdict"] == "dtype_mismatch"
    computed = [e for e in r["attribution"] if e["dtype"] is not None]
    differs = [e for e in computed if e["dtype"] != e["program_dtype"]]
    assert differs and r["first_stage_over"] == differs[0]["stage"]
    first = differs[0]
    # the rebuilt rms_norm reads the float32 upcast, so the weight multiply comes out float32
    assert first["stage"] == "return:mul" and first["dtype"] == "float32" and first["program_dtype"] == "float16"
    assert "rms_norm" in first["node"]
    # the cast back to float16 the program writes is not computed at all
    assert {e["stage"]: e for e in r["attribution"]}["return:cast"]["dtype"] is None
    # the values themselves are within their bounds: it is the dtype, not the precision
    assert not any(e["over"] for e in computed)

    run = _script(cli_here, tmp_path, seed("executorch-24428-qwen-fp16.json"), "--path", "executorch-recompose")
    assert run.returncode == 1, run.stdout + run.stderr
    assert ("first stage whose dtype differs from the program's: return:mul (computed in float32, "
            "the program computes it in float16") in run.stdout
