"""Program cases in the spec (docs/contracts.md §7): checked before anything runs, stable ids, catalog ids unchanged."""
from __future__ import annotations

import json

import pytest

from cases import nearmiss
from harness.spec import CaseSpec, SpecError

QWEN = {"pattern": "rms_norm", "dtype": "float16", "shape": [4, 64], "params": {"kind": "normal"},
        "program": nearmiss.QWEN}


def test_a_program_case_normalises_and_round_trips():
    spec = CaseSpec.from_dict(QWEN)
    assert spec.style == "program" and spec.param_shapes == (("w", (64,)),)
    d = spec.to_dict()
    assert "cast" not in d and "affine" not in d and "inputs" not in d and d["program"] == nearmiss.QWEN
    assert CaseSpec.from_dict(d) == spec and CaseSpec.from_json(spec.to_json()).case_id == spec.case_id


def test_the_case_id_covers_the_program_and_the_structure_key_its_extra_inputs():
    a = CaseSpec.from_dict(QWEN)
    b = CaseSpec.from_dict({**QWEN, "program": QWEN["program"].replace("pow(2)", "pow(3)")})
    assert a.case_id != b.case_id and a.structure_key() != b.structure_key()
    y = {**QWEN, "program": "return (x + y) * w", "inputs": {"y": {"kind": "normal"}}}
    y2 = {**y, "inputs": {"y": {"kind": "uniform"}}}
    assert CaseSpec.from_dict(y).case_id != CaseSpec.from_dict(y2).case_id
    assert CaseSpec.from_dict(y).structure_key() == CaseSpec.from_dict(y2).structure_key()


def test_catalog_cases_keep_their_case_ids():
    # the committed baseline is keyed by these ids; program keys appear only in program cases
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
                               "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0}})
    assert "program" not in spec.to_dict() and spec.case_id == "052c6ae297e3"


@pytest.mark.parametrize("change,words", [
    ({"program": "import os\nreturn x"}, "import"),
    ({"program": "return __import__('os').system('true')"}, "__import__"),
    ({"program": "return x.grad"}, "grad"),
    ({"program": "h = x\nreturn h\nreturn x"}, "second return"),
    ({"program": "return x * y"}, "'y'"),
    ({"program": "for i in x:\n    h = i\nreturn x"}, "line 1"),
    ({"program": 3}, "program"),
    ({"inputs": {"q": {"kind": "normal"}}}, "inputs.q"),
    ({"param_shapes": {"w": [0]}}, "param_shapes.w"),
    ({"param_shapes": {"b": [64]}}, "does not read"),
    ({"cast": "to"}, "cast"),
    ({"style": "qwen"}, "style"),
])
def test_a_bad_program_case_is_one_line_naming_the_problem(change, words):
    with pytest.raises(SpecError) as info:
        CaseSpec.from_dict({**QWEN, **change})
    message = str(info.value)
    assert "\n" not in message and words in message


def test_the_command_line_rejects_a_program_before_anything_runs(cli_here, tmp_path):
    marker = tmp_path / "pwned"
    case = tmp_path / "case.json"
    case.write_text(json.dumps({**QWEN, "program": f"return __import__('os').system('touch {marker}')"}))
    out = tmp_path / "out"
    proc = cli_here("run", "--case", str(case), "--paths", "eager", "--out", str(out), "--jobs", "0")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "__import__" in proc.stderr and "Traceback" not in proc.stderr
    assert not marker.exists() and not (out / "results.jsonl").exists()
