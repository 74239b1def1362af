"""The repro script's stages are normdiff's: the same labels, FP64 values and (never tighter) bounds."""
import numpy as np
import pytest
import torch

from harness.attribution.stages import program_stages
from harness import paths
from harness.spec import CaseSpec
from harness.oracle.inputs import make_inputs
from harness.repro import script as repro_script
from harness.repro.stage_table import stage_section, stage_tolerance
from tests.program.test_calls import NEIGHBOURHOOD

SPECS = [
    {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
     "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0}},
    {"pattern": "layer_norm", "dtype": "bfloat16", "shape": [3, 64], "params": {"kind": "normal"}},
    {"pattern": "layer_norm", "style": "manual", "dtype": "float16", "shape": [3, 64], "params": {"kind": "normal"}},
    {"pattern": "layer_norm", "style": "upcast", "dtype": "bfloat16", "shape": [3, 64], "affine": "weight"},
    {"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 8, 64], "params": {"kind": "normal"}},
    {"pattern": "rms_norm", "style": "t5", "dtype": "float16", "shape": [3, 64], "params": {"kind": "normal"}},
    {"pattern": "rms_norm", "style": "gemma", "dtype": "bfloat16", "shape": [3, 64], "params": {"kind": "normal"}},
    {"pattern": "rms_norm", "dtype": "float32", "shape": [3, 64], "affine": "none"},
    {"pattern": "group_norm", "dtype": "float16", "shape": [2, 8, 4, 4], "groups": 2, "params": {"kind": "normal"}},
    {"pattern": "rms_norm", "dtype": "float16", "shape": [4, 64], "params": {"kind": "normal"},
     "program": "h = x.to(torch.float32)\nv = (h * y).pow(2).mean(-1, keepdim=True)\nreturn w * (h * torch.rsqrt(v + eps)).to(x.dtype)",
     "inputs": {"y": {"kind": "normal"}}},
    {"pattern": "layer_norm", "dtype": "bfloat16", "shape": [2, 2, 3, 16], "params": {"kind": "normal"},
     "program": "h0 = F.layer_norm(x.narrow(1, 0, 1), (16,), w, None, eps)\nh1 = F.layer_norm(x.narrow(1, 1, 1), (16,), s, None, eps)\nreturn torch.cat([h0, h1], 1)"},
    NEIGHBOURHOOD,  # every op around a norm (harness/program/calls.py)
]


@pytest.mark.parametrize("raw", SPECS, ids=lambda r: f"{r['pattern']}-{r.get('style', 'program' if 'program' in r else 'module')}-{r['dtype']}")
def test_script_stages_are_normdiffs(raw):
    spec = CaseSpec.from_dict(raw)
    inputs = make_inputs(spec)
    section = stage_section(spec)
    env = {"np": np, "torch": torch, **inputs.arrays, **inputs.params}
    exec(compile(section, "<stage section>", "exec"), env)  # the generated NumPy, as the script runs it
    ours = env["program_stages"]()
    theirs = program_stages(spec, inputs)
    assert [(s[0], s[1], s[2], s[4], s[5]) for s in ours] == [(p.label, p.op, p.dtype, p.part, p.returns)
                                                               for p in theirs]
    for (label, _, _, value, _, _), p in zip(ours, theirs):
        assert np.shape(value) == np.shape(p.value), label
        np.testing.assert_allclose(value, p.value, rtol=1e-12, atol=1e-300, err_msg=label)
        rtol, atol = env["STAGE_TOLERANCE"][label]
        assert np.all(atol + rtol * np.abs(p.value) >= p.err), label  # never tighter than normdiff's


def test_stage_tolerance_follows_the_bound():
    value = np.array([0.0, 1.0, -2.0, 4.0])
    err = 1e-3 + 1e-2 * np.abs(value)
    rtol, atol = stage_tolerance(value, err)
    assert np.all(atol + rtol * np.abs(value) >= err)
    assert rtol <= 1.1e-2 and atol <= 1.1e-3 * 2
    assert stage_tolerance(np.array([1.0]), np.array([np.inf]))[1] == np.inf


def test_only_paths_that_expose_intermediates_get_the_table():
    """Declared (Path.has_intermediates), never found in the script's text."""
    spec = CaseSpec.from_dict(SPECS[0])
    for path in ("eager", "tvm", "tvm-decompose", "executorch-recompose", "executorch-recompose-capture", "openvino",
                 "openvino-bf16"):
        assert paths.get(path).has_intermediates and "def print_stage_table(" in repro_script.render(spec, path), path
    for path in ("executorch", "onnxruntime", "inductor"):
        assert not paths.get(path).has_intermediates, path
        assert "def print_stage_table(" not in repro_script.render(spec, path), path
    batch = CaseSpec.from_dict({"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3]})
    assert "def print_stage_table(" not in repro_script.render(batch, "tvm")  # no program: no stages


def test_a_gradient_scripts_stages_are_its_lifted_backwards():
    """A gradient case's table: the lifted backward's stages (docs/attribution.md "The backward"), on the script's
    inputs and cotangents and the parameters read off its model (STATE), each gradient's stage marked."""
    from harness.attribution.stages import BackwardCase
    from harness.core.tensors import to_numpy
    from harness.repro import gradient_script as G

    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [8, 64], "grad": True,
                               "params": {"kind": "normal"}})
    made = G.setup(spec)
    module = made.build()[0]
    env = {"np": np, "torch": torch, "to_numpy": to_numpy, "x": made.inputs.x, "dy": made.inputs.cotangents[0],
           "STATE": dict(module.forward_module.named_parameters())}
    exec(compile(stage_section(spec), "<stage section>", "exec"), env)
    ours = env["program_stages"]()
    theirs = program_stages(spec, made.inputs, backward=BackwardCase(made.backward, made.build))
    assert [(s[0], s[5]) for s in ours] == [(p.label, p.returns) for p in theirs]
    assert [s[0] for s in ours if s[5] is not None] == ["_to_copy_6:cast", "_to_copy_7:cast", "_to_copy_8:cast"]
    for (label, _, _, value, _, _), p in zip(ours, theirs):
        np.testing.assert_allclose(value, p.value, rtol=1e-12, atol=1e-300, err_msg=label)
        rtol, atol = env["STAGE_TOLERANCE"][label]
        assert np.all(atol + rtol * np.abs(p.value) >= p.err), label
