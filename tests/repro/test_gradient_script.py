"""A gradient case's repro scripts (harness/repro/gradient_script.py): written, run in fresh interpreters on eager.

The full and the short script of one `"grad": true` case must decide as
normdiff does: torch's CPU float16 LayerNorm backward fails its check (its
d_bias and the float16 saved statistics: cases/gradient_bugs.py), the
float32 one passes. Their cotangents are normdiff's bytes and their reference
is the lifted backward's FP64 evaluation.
"""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np

from harness.repro import gradient_script as G
from harness.repro.script import render
from harness.repro.short_script import render_short
from harness.spec import CaseSpec

_LN = {"pattern": "layer_norm", "dtype": "float16", "shape": [64, 64], "grad": True}


def _run(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, cwd=path.parent)


def _errors(stdout: str) -> dict[str, float]:
    """Each gradient's largest error, as the script printed it."""
    return {m[1]: float(m[2]) for m in re.finditer(r"^output (\w+): max abs error: eager ([\d.e+-]+)", stdout, re.M)}


def test_a_gradient_cases_scripts_fail_on_eagers_float16_backward_and_pass_its_float32_one(tmp_path):
    spec = CaseSpec.from_dict(_LN)
    setup = G.setup(spec)
    full, short = tmp_path / "full.py", tmp_path / "short.py"
    full.write_text(render(spec, "eager"))
    short.write_text(render_short(spec, "eager", "float16 LayerNorm backward"))
    assert "d_weight" in short.read_text() and "def backward64(x, dy, weight" in full.read_text()
    # torch's own module: the short script's reference is its float64 autograd (what the lifted backward is checked
    # against), and the two scripts' references give the same errors below
    assert "ref = to_numpy(Backward(copy.deepcopy(model.forward_module).double(), 1)(" in short.read_text()
    done = [_run(p) for p in (full, short)]
    for proc in done:
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "the cotangents differ" not in proc.stderr and "Traceback" not in proc.stderr
    # the full script's stage table names what the record's attribution names: the mean torch saves in float16
    assert "first stage over its bound: var_mean_mean:mean (computed in float16" in done[0].stdout
    errors = [_errors(proc.stdout) for proc in done]
    assert errors[0] == errors[1] and set(errors[0]) == {"d_x", "d_weight", "d_bias"}
    # the scripts' eager gradients against their reference err what normdiff's scoring measures
    ref = setup.ref
    grads = setup.build()[0](*setup.build()[1])
    for name, r, g in zip(ref.output_names, ref.each, grads):
        measured = float(np.max(np.abs(g.double().numpy() - r.out)))
        assert abs(errors[0][name] - measured) <= 1e-6 * max(1.0, measured), (name, errors[0][name], measured)

    control = CaseSpec.from_dict({**_LN, "dtype": "float32"})
    passing = tmp_path / "control.py"
    passing.write_text(render_short(control, "eager", "float32 LayerNorm backward"))
    proc = _run(passing)
    assert proc.returncode == 0, proc.stdout + proc.stderr
