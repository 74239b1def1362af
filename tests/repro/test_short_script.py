"""The report's short script (harness/repro/short_script.py): what it holds and how short it is.

Running it is tests/repro/test_report.py's (through the real command line).
"""
from __future__ import annotations

import ast

from cases import bugs
from harness.spec import CaseSpec
from harness.repro.short_script import first_values, prune, render_short


def test_prune_keeps_what_the_statements_reach_and_the_last_definition_of_a_name():
    code = ("def a():\n    return b()\n\n\ndef b():\n    return 1\n\n\ndef b():\n    return 2\n\n\n"
            "def unused():\n    return a()\n\n\nprint(a())\n")
    assert prune(code) == "def a():\n    return b()\n\ndef b():\n    return 2\n\nprint(a())\n"


def test_the_seeds_short_script_is_the_seeds_script_in_size():
    bug = bugs.get("tvm-20909")
    text = render_short(bug.specs[0], "tvm-decompose", bug.title)
    assert len(text.splitlines()) <= 100
    ast.parse(text)
    assert "x = np.resize([-0.25, 0.25], (1, 4096)).astype(np.float16)" in text  # a one-line construction
    assert "nn.LayerNorm(4096, eps=1e-05" in text and "DecomposeOpsForTraining" in text
    assert "def intermediates" not in text and "import zlib" not in text  # no stage table, no unused stream
    assert "hashlib" not in text and "weight =" not in text  # nothing drawn to check; torch's init
    assert "w, b = 1.0, 0.0  # torch's init" in text and "ALLOWED = " in text  # the witnesses' allowance
    assert text.endswith("raise SystemExit(check(out, eager))\n")
    assert render_short(bug.specs[0], "tvm-decompose", bug.title) == text


def test_a_seeded_input_draws_from_normdiffs_stream_and_a_program_keeps_its_text():
    bug = bugs.get("executorch-new-recompose-used-twice")
    text = render_short(bug.specs[0], "executorch-recompose", bug.title)
    assert "def _rng(seed: int, stream: int" in text and "x = rng(0).normal(0.0, 1.0, 256)" in text
    assert "        return w * (n + n * n).to(x.dtype)" in text
    assert "import zlib" in text and "hashlib.sha256(" in text  # drawn: checked byte for byte
    # the reference: the model's class with its float32 cast mapped to float64, not a second copy of it
    assert "class Program64(Program):" in text and "        h = x.to(torch.float64)" in text
    assert text.count("def __init__") == 1 and "rows = lambda a: np.asarray(a).reshape(4, -1)" in text


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


def test_a_short_to_torch_gives_normdiffs_bits(tmp_path):
    """The short script's to_torch drops the branches its case never takes; on the case's dtypes it is
    harness.core.tensors.to_torch, bit for bit."""
    import importlib.util

    import ml_dtypes
    import numpy as np
    import torch

    from harness.core.tensors import to_torch
    from harness.repro.short_script import _conversions

    for dtype in ("float16", "bfloat16"):
        spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": dtype, "shape": [2, 8]})
        path = tmp_path / f"conv_{dtype}.py"
        path.write_text("import ml_dtypes\nimport numpy as np\nimport torch\n\n" + _conversions(spec), encoding="utf-8")
        module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(path.stem, path))
        module.__spec__.loader.exec_module(module)
        x = np.linspace(-3, 3, 16).reshape(2, 8).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16)
        mine, theirs = module.to_torch(x), to_torch(x)
        assert mine.dtype == theirs.dtype and torch.equal(mine.view(torch.int16), theirs.view(torch.int16))
