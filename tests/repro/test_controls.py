"""The report's controls (harness/repro/controls.py): each derived from the case, or said why there is none."""
from __future__ import annotations

from cases import bugs
from harness import paths
from harness.repro.controls import controls, float32_input, float32_inside, float32_program
from harness.spec import CaseSpec
from helpers import small_layer_norm


def test_every_rewrite_path_declares_its_control_path_and_it_is_a_path_without_one():
    declared = {name: paths.get(name).control_path for name in paths.names()}
    assert declared["tvm-decompose"] == declared["tvm-decompose-inference"] == "tvm"
    assert declared["executorch-recompose"] == declared["executorch-recompose-capture"] == "executorch"
    assert declared["executorch-recompose-no-dim-order"] == "executorch"
    assert declared["onnxruntime-fused"] == "onnxruntime" and declared["inductor-emulate"] == "inductor"
    assert declared["openvino-bf16"] == "openvino"
    for name, control in declared.items():
        if control is not None:
            assert control in paths.names() and declared[control] is None, name


def test_the_seed_gets_the_seeds_own_three_controls():
    seed = bugs.get("tvm-20909").specs[0]
    off, inside, wide = controls(seed, "tvm-decompose")
    assert (off.spec, off.path) == (seed, "tvm")
    assert inside.spec.style == "upcast" and inside.spec.dtype == "float16" and inside.path == "tvm-decompose"
    assert {**inside.spec.to_dict(), "style": "module", "cast": None} == seed.to_dict()
    assert wide.spec.dtype == wide.spec.weight_dtype == "float32" and wide.path == "tvm-decompose"


def test_a_program_is_computed_in_float32_and_cast_back():
    text = float32_program("h = x.half()\nreturn F.linear(h, lw, lb).to(x.dtype)", {"x", "lw", "lb"}, "float16")
    assert text == "h = x.float().float()\nreturn F.linear(h, lw.float(), lb.float()).to(x.dtype).to(torch.float16)"
    group = CaseSpec.from_dict({"pattern": "group_norm", "dtype": "bfloat16", "shape": [2, 8, 4, 4], "groups": 4})
    spec, how = float32_inside(group)
    assert spec.program == "return F.group_norm(x.float(), 4, w.float(), b.float(), eps).to(torch.bfloat16)"
    assert "cast back to bfloat16" in how


def test_a_float32_program_that_rounds_to_half_inside_is_computed_in_float32():
    spec = CaseSpec.from_dict({"pattern": "program", "dtype": "float32", "shape": [4, 64],
                               "program": "h = x.to(torch.float16)\nreturn (h * h).to(torch.float32)"})
    inside, how = float32_inside(spec)
    assert inside.program == "h = x.float().to(torch.float32)\nreturn (h * h).to(torch.float32).to(torch.float32)"
    assert how.endswith("cast back to float32")


def test_a_case_without_a_float32_variant_says_why():
    batch = CaseSpec.from_dict({"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3]})
    assert float32_inside(batch) == (None, "this batch_norm case has no program to compute in float32 (the program "
                                           "language has no batch_norm)")
    wide = CaseSpec.from_dict(small_layer_norm())
    assert float32_inside(wide)[0] is None and float32_input(wide) == (None, "the case's input is float32 already")
    rows = controls(wide, "eager")
    assert [c.runs for c in rows] == [False, False, False]
    assert rows[0].why == "`eager` applies no rewrite of its own (no control path)"


def test_the_catalog_entrys_own_controls_follow_unless_already_there():
    bug = bugs.get("tvm-20909")
    names = [c.name for c in controls(bug.specs[0], "tvm-decompose", bug.controls)]
    assert names == ["rewrite off", "float32 inside", "float32 input"]  # both catalog controls are among them
    bug = bugs.get("tvm-new-bf16-layer-norm")
    extra = controls(bug.specs[0], "tvm", bug.controls)[-1]
    assert extra.name == "catalog control" and (extra.spec, extra.path) == bug.controls[0]
