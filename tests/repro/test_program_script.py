"""Repro scripts of program cases: the program as the forward, every input drawn, the FP64 reference."""
from __future__ import annotations

import subprocess
import sys

import pytest

from cases import nearmiss
from harness.spec import CaseSpec
from harness.repro.program_script import float64_source
from harness.repro.script import render

NEAR_MISS = CaseSpec.from_dict(nearmiss.spec_of(nearmiss.get("scaled-not-squared"), "float32"))


def _run(text: str, tmp_path) -> subprocess.CompletedProcess:
    script = tmp_path / "repro.py"
    script.write_text(text)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)


def test_the_reference_maps_every_rounding_to_float64():
    source = "h = x.to(torch.float16)\nv = h.float().pow(2).mean(-1, keepdim=True)\nreturn (h * v).to(x.dtype).half()"
    mapped = float64_source(source)
    assert "torch.float64" in mapped and ".double()" in mapped
    assert "float16" not in mapped and ".float()" not in mapped and ".half()" not in mapped
    assert "x.dtype" in mapped  # x itself is float64 in the reference


def test_the_script_writes_the_program_as_written_and_both_inputs(tmp_path):
    text = render(NEAR_MISS, "eager")
    for line in NEAR_MISS.program.splitlines():
        assert f"        {line}" in text
    assert "def forward(self, x, y):" in text and "INPUTS = (x, y,)" in text
    proc = _run(text, tmp_path)  # the script checks normdiff's input bytes by SHA-256 itself
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "OK: eager matches the FP64 reference" in proc.stdout


def test_the_same_case_gives_the_same_script_bytes():
    assert render(NEAR_MISS, "executorch-recompose") == render(CaseSpec.from_json(NEAR_MISS.to_json()),
                                                                "executorch-recompose")


@pytest.mark.slow
def test_a_near_miss_rewritten_wrongly_exits_1_while_the_bug_is_there(tmp_path):
    proc = _run(render(NEAR_MISS, "executorch-recompose"), tmp_path)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "FAIL: rows beyond normdiff's check" in proc.stdout
    assert "'rms_norm_built': True" in proc.stdout


FUSED_ADD = CaseSpec.from_dict({
    "pattern": "rms_norm", "dtype": "bfloat16", "shape": [4, 64], "params": {"kind": "normal"},
    "inputs": {"r": {"kind": "normal"}},
    "program": "h = x.float() + r.float()\nv = h.pow(2).mean(-1, keepdim=True)\n"
               "normed = (h * torch.rsqrt(v + eps)).to(x.dtype) * w\nreturn normed, h.to(x.dtype)"})


@pytest.mark.slow
def test_a_script_of_two_outputs_checks_each_against_its_own_reference(tmp_path):
    text = render(FUSED_ADD, "executorch-recompose")
    assert "OUTPUT_NAMES = ('normed', '1')" in text and "CHECKS = (check_0, check_1,)" in text
    assert "def print_stage_table" in text  # several outputs keep the stage table
    proc = _run(text, tmp_path)  # the rebuilt float32 norm: the normalized output's dtype, not the residual's
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "FAIL: output normed: output dtype float32, expected bfloat16" in proc.stdout
    assert "output 1: executorch-recompose (bfloat16)" in proc.stdout and "output 1: output" not in proc.stdout
    assert "first stage whose dtype differs from the program's" in proc.stdout  # the table, for several outputs
