"""The plug-in face, over every registered path: a path owns its description, packages and repro part.

Adding a path is one module and one registry line; these tests hold every name
in the registry to that: it describes itself, its packages are installed with
versions the records carry, and `normdiff repro` writes a standalone script
for it that parses and passes a trivial case.
"""
from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from harness import paths
from harness.spec import CaseSpec
from harness.engine.execute import execute
from harness.repro.script import render

TRIVIAL = CaseSpec.from_dict({"pattern": "rms_norm", "style": "qwen", "dtype": "float32", "shape": [2, 16]})


@pytest.mark.parametrize("name", paths.default_names())
def test_every_path_describes_itself_and_its_packages(name):
    path = paths.get(name)
    assert path.name == name and path.description and "\n" not in path.description
    assert "torch" in path.packages
    for dist in path.packages:
        assert paths.installed_version(dist), f"{name}: {dist} is not installed"
    assert set(path.warm_imports) >= {"torch"}


def test_records_carry_the_versions_of_every_paths_packages():
    record = execute(TRIVIAL, "eager")
    assert set(record["versions"]) >= {"torch", "tvm", "executorch", "numpy"}
    assert all(record["versions"].values())


def test_records_name_the_cpu_features_their_kernels_may_be_picked_by():
    from harness.core.machine import cpu_features

    here = cpu_features()
    assert execute(TRIVIAL, "eager")["cpu"] == (None if here is None else list(here))


@pytest.mark.slow
@pytest.mark.parametrize("name", paths.default_names())  # subprocesses: spread over the xdist workers
def test_every_path_writes_a_script_that_passes_a_trivial_case(name, tmp_path):
    text = render(TRIVIAL, name)
    ast.parse(text)
    script = tmp_path / "repro.py"
    script.write_text(text)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"OK: {name} matches the FP64 reference" in proc.stdout


def test_normdiff_paths_lists_every_path_with_versions(cli):
    proc = cli("paths")
    assert proc.returncode == 0, proc.stderr
    for name in paths.names():
        assert any(line.startswith(name + " ") for line in proc.stdout.splitlines()), name
    assert "apache-tvm 0.27.0.post1" in proc.stdout and "executorch 1.5.1" in proc.stdout


def test_an_out_of_tree_path_joins_through_the_environment(cli):
    env = {"NORMDIFF_EXTRA_PATHS": "abort=tests.crashy_paths:AbortPath"}
    proc = cli("paths", env=env)
    assert proc.returncode == 0 and any(line.startswith("abort ") for line in proc.stdout.splitlines())
