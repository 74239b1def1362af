"""The report's short script (harness/repro/short_script.py): what it holds and how short it is.

Running it is tests/repro/test_report.py's (through the real command line).
"""
from __future__ import annotations

import ast

from cases import bugs
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
    assert "x = np.resize([-0.25, 0.25], SHAPE).astype(DTYPE)" in text  # the input as a one-line construction
    assert "nn.LayerNorm(4096, eps=1e-05" in text and "DecomposeOpsForTraining" in text
    assert "def intermediates" not in text and "import zlib" not in text  # no stage table, no unused stream
    assert "raise SystemExit(1 if over.any()" in text
    assert render_short(bug.specs[0], "tvm-decompose", bug.title) == text


def test_a_seeded_input_draws_from_normdiffs_stream_and_a_program_keeps_its_text():
    bug = bugs.get("executorch-new-recompose-used-twice")
    text = render_short(bug.specs[0], "executorch-recompose", bug.title)
    assert "def _rng(seed: int, stream: int" in text and "x = rng(0).normal(0.0, 1.0, 256)" in text
    assert "        return w * (n + n * n).to(x.dtype)" in text
    assert "import zlib" in text


def test_first_values_reads_the_line_the_script_prints():
    output = "expected (FP64 reference): [1.0]\neager (float16): [-1.0, 1.0]\ntvm-decompose (float16): [-1.4140625]\n"
    assert first_values(output, "tvm-decompose") == ("float16", "[-1.4140625]")
    assert first_values(output, "eager") == ("float16", "[-1.0, 1.0]")
    assert first_values(output, "tvm") is None
