"""A module case's repro script imports the user's class (the one import besides the libraries under test),
builds it as normdiff does, checks every input and parameter byte, and fails while the finding is present;
`--inline` pastes the lifted program instead and gives the same answer."""
import ast
import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT

TESTS = os.path.join(ROOT, "tests")
LLAMA = {"pattern": "rms_norm", "class": "user_norms:LlamaRMSNorm", "init": {"hidden_size": 64},
         "dtype": "float16", "shape": [2, 8, 64], "params": {"kind": "normal"}}


def script(cli, tmp_path, spec, path, *flags):
    case = tmp_path / "case.json"
    case.write_text(json.dumps(spec))
    out = tmp_path / f"repro_{path}{'_inline' if flags else ''}.py"
    r = cli("repro", str(case), "--path", path, "-o", str(out), *flags, env={"PYTHONPATH": TESTS})
    assert r.returncode == 0, r.stderr
    return out


def run(path, with_class=True):
    env = dict(os.environ, PYTHONPATH=TESTS if with_class else "")
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, env=env)


def imports(path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_the_seed_bug_on_the_users_class_reproduces_and_eager_passes(cli, tmp_path):
    bad = script(cli, tmp_path, LLAMA, "executorch-recompose")
    assert "from user_norms import LlamaRMSNorm" in bad.read_text() and "import root:" in bad.read_text()
    assert "harness" not in imports(bad) and "normdiff" not in imports(bad) and "user_norms" in imports(bad)
    r = run(bad)
    assert r.returncode == 1 and "output dtype float32, expected float16" in r.stdout + r.stderr, r.stdout + r.stderr
    r = run(script(cli, tmp_path, LLAMA, "eager"))
    assert r.returncode == 0 and "OK: eager matches" in r.stdout, r.stdout + r.stderr


def test_inline_pastes_the_lifted_program_and_needs_no_class(cli, tmp_path):
    inline = script(cli, tmp_path, LLAMA, "executorch-recompose", "--inline")
    assert "user_norms" not in imports(inline) and "to_1 = mul.to(torch.float16)" in inline.read_text()
    r = run(inline, with_class=False)
    assert r.returncode == 1 and "output dtype float32, expected float16" in r.stdout + r.stderr


@pytest.mark.parametrize("spec", [
    {"class": "user_norms:GatedRMSNorm", "init": {"hidden_size": 32}, "dtype": "bfloat16", "shape": [2, 32],
     "inputs": {"gate": {"kind": "normal"}}},
    {"class": "user_norms:AdaptiveLayerNorm", "init": {"dim": 32, "cond_dim": 8}, "dtype": "float32",
     "shape": [2, 4, 32], "inputs": {"cond": {"kind": "normal", "shape": [2, 8]}}},
])
def test_inputs_parameters_and_a_constructors_draws_are_normdiffs(cli, tmp_path, spec):
    r = run(script(cli, tmp_path, spec, "eager"))
    assert r.returncode == 0 and "OK: eager matches" in r.stdout, r.stdout + r.stderr
