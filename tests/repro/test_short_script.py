"""The report's short script (harness/repro/short_script.py): what it holds and how short it is.

Running it is tests/repro/test_report.py's (through the real command line).
"""
from __future__ import annotations

import ast

from cases import bugs
from harness.spec import CaseSpec
from harness.repro.short_script import first_values, render_short, rng_code


def test_a_forward_cases_script_has_no_line_of_the_pipelines_gradient_branches():
    forward = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [2, 8]})
    assert "is_backward" not in render_short(forward, "tvm-decompose", "t")
    assert "is_backward" in render_short(forward.replace(grad=True), "executorch", "t")  # it exports the Backward
    assert "is_backward" not in render_short(forward.replace(grad=True), "tvm-decompose", "t")  # the norm alone


def test_the_seeds_short_script_is_the_seeds_script_in_size():
    bug = bugs.get("tvm-20909")
    text = render_short(bug.specs[0], "tvm-decompose", bug.title)
    assert len(text.splitlines()) <= 100
    ast.parse(text)
    assert "x = np.resize([-0.25, 0.25], (1, 4096)).astype(np.float16)" in text  # a one-line construction
    assert "nn.LayerNorm(4096, eps=1e-05" in text and "DecomposeOpsForTraining" in text
    assert "def intermediates" not in text and "zlib" not in text  # no stage table, no unused stream
    assert "hashlib" not in text and "weight =" not in text  # nothing drawn to check; torch's init
    assert "w, b = 1.0, 0.0  # torch's init" in text and "ALLOWED = " in text  # the witnesses' allowance
    assert text.endswith("raise SystemExit(check(out, eager))\n") and "def single" not in text  # one output
    assert render_short(bug.specs[0], "tvm-decompose", bug.title) == text


def test_a_seeded_input_draws_from_normdiffs_stream_and_a_program_keeps_its_text():
    bug = bugs.get("executorch-new-recompose-used-twice")
    text = render_short(bug.specs[0], "executorch-recompose", bug.title)
    assert "rng = lambda stream, name=None: np.random.default_rng([0, stream]" in text
    assert "x = rng(0).normal(0.0, 1.0, 256)" in text
    assert "        return w * (n + n * n).to(x.dtype)" in text
    assert "hashlib, zlib" in text and "hashlib.sha256(" in text  # drawn: checked byte for byte
    # the reference: the model's class with its float32 cast mapped to float64, not a second copy of it
    assert "class Program64(Program):" in text and "        h = x.to(torch.float64)" in text
    assert text.count("def __init__") == 1 and "rows = lambda a: np.asarray(a).reshape(4, -1)" in text


def test_the_one_line_rng_draws_normdiffs_streams():
    import zlib

    import numpy as np

    from harness.oracle.inputs import _rng

    scope = {"np": np, "zlib": zlib}
    exec(rng_code(7), scope)  # the script's line, as the script runs it
    for stream, name in ((0, None), (1, None), (5, "0"), (3, "w")):
        mine = scope["rng"](stream) if name is None else scope["rng"](stream, name)
        assert mine.normal(0.0, 1.0, 64).tobytes() == _rng(7, stream, name).normal(0.0, 1.0, 64).tobytes()


def test_a_program_that_rounds_nowhere_is_its_own_reference():
    spec = CaseSpec.from_dict({"pattern": "rms_norm", "style": "program", "dtype": "float32", "shape": [4, 64],
                               "params": {"kind": "normal"}, "param_shapes": {"w": [64]},
                               "program": "v = x.pow(2).mean(-1, keepdim=True)\nreturn w * (x * torch.rsqrt(v + eps))"})
    text = render_short(spec, "eager", "a program")
    assert "Program64" not in text and "ref = to_numpy(Program({'w': w.astype(np.float64)}, 1e-06)(" in text
    assert "ALLOWED" not in text and "over = ratio(err) > 1.0" in text  # eager: held to the bound alone


def test_first_values_reads_the_line_the_script_prints():
    output = "expected (FP64 reference): [1.0]\neager (float16): [-1.0, 1.0]\ntvm-decompose (float16): [-1.4140625]\n"
    assert first_values(output, "tvm-decompose") == ("float16", "[-1.4140625]")
    assert first_values(output, "eager") == ("float16", "[-1.0, 1.0]")
    assert first_values(output, "tvm") is None


def test_a_short_to_torch_and_to_numpy_give_normdiffs_bits(tmp_path):
    """The short script's conversions drop the branches its case never takes; on the case's dtypes they are
    harness.core.tensors.to_torch and to_numpy, bit for bit (a case of one output: its one tensor, in a list
    or not)."""
    import importlib.util

    import ml_dtypes
    import numpy as np
    import torch

    from harness.core.tensors import to_numpy, to_torch
    from harness.oracle.inputs import make_inputs
    from harness.oracle.reference import reference
    from harness.repro.short_script import _conversions

    for dtype in ("float16", "bfloat16"):
        spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": dtype, "shape": [2, 8]})
        text = _conversions(spec, reference(spec, make_inputs(spec)))
        assert ("ml_dtypes" in text.split("def single")[0]) == (dtype == "bfloat16")  # to_numpy's branch
        path = tmp_path / f"conv_{dtype}.py"
        path.write_text("import ml_dtypes\nimport numpy as np\nimport torch\n\n" + text, encoding="utf-8")
        module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(path.stem, path))
        module.__spec__.loader.exec_module(module)
        x = np.linspace(-3, 3, 16).reshape(2, 8).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16)
        mine, theirs = module.to_torch(x), to_torch(x)
        assert mine.dtype == theirs.dtype and torch.equal(mine.view(torch.int16), theirs.view(torch.int16))
        for t in (theirs, [theirs], (theirs,)):
            got, want = module.to_numpy(t), to_numpy(t)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


LIMIT = 100  # lines: a short script is read whole (apache/tvm#20909's is 60)


def test_every_catalog_entrys_short_script_fits_a_screen():
    """Every entry's short script (its first spec on its first path, as `repro BUG-ID --report` writes it) is at
    most LIMIT lines; the recompose paths' and TVM's training flow's included (they paste the passes' own
    targets and the path's own functions, not copies). A module case's is its lifted program's:
    tests/commands/test_bugs.py's `bugs --check` writes those."""
    lengths = {}
    for b in bugs.BUGS:
        if not b.specs[0].is_module:
            text = render_short(b.specs[0], b.paths[0], b.title)
            lengths[b.id] = len(text.splitlines())
    over = {i: n for i, n in lengths.items() if n > LIMIT}
    assert not over, over


def test_a_gradient_on_a_path_differentiating_the_norm_itself_takes_eagers_gradients_from_autograd():
    """TVM differentiates vjp_target(model.forward_module, …) itself: the script pastes neither normdiff's Backward
    nor torch's joint graph (export_program without its gradient branch), and its `gradients` gives normdiff's
    Backward's gradients bit for bit: eager's in float16, the FP64 reference's in float64."""
    import copy

    import numpy as np
    import torch

    from harness.oracle.backward import Backward
    from harness.repro.short_script import _gradients_code

    bug = bugs.get("tvm-new-gradient-fp16")
    text = render_short(bug.specs[0], "tvm-decompose", bug.title)
    assert "class Backward" not in text and "joint_graph" not in text and "is_backward" not in text
    assert "def gradients(module, x, dy):" in text and "eagers = gradients(model, *INPUTS)" in text
    assert "class Backward" in render_short(bug.specs[0], "inductor", bug.title)  # a path compiling the Backward
    scope = {"np": np, "torch": torch, "copy": copy, "model": torch.nn.LayerNorm(16, dtype=torch.float16)}
    g = np.random.default_rng(3)
    x, dy = (g.normal(0.0, 1.0, (4, 16)).astype(np.float16) for _ in range(2))
    with torch.no_grad():
        scope["model"].weight.copy_(torch.from_numpy(g.normal(1.0, 0.5, 16).astype(np.float16)))
    scope["INPUTS"] = (x, dy)
    exec(_gradients_code(), scope)  # defines gradients and ref, as the script runs them
    theirs = Backward(copy.deepcopy(scope["model"]), 1)(torch.from_numpy(x), torch.from_numpy(dy))
    reference = Backward(copy.deepcopy(scope["model"]).double(), 1)(*(torch.from_numpy(a.astype(np.float64)) for a in (x, dy)))
    for mine, want in ((scope["gradients"](scope["model"], x, dy), theirs), (scope["ref"], reference)):
        assert len(mine) == len(want) == 3
        for m, w in zip(mine, want):
            assert m.dtype == w.detach().numpy().dtype and m.tobytes() == w.detach().numpy().tobytes()
