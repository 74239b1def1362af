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
from helpers import REPRESENTATIVES

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


# Each script as `python repro.py` would run it (as __main__, its own imports), all in one fresh interpreter:
# one start instead of one per path (16 starts of ~4 s each were most of this test's time).
RUN_SCRIPTS = """
import contextlib, io, runpy, sys, traceback
for script in sys.argv[1:]:
    out, code = io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
    with open(script + ".out", "w") as fh:
        fh.write(out.getvalue())
    print(script, code, flush=True)
"""


def _scripts_pass_a_trivial_case(names, tmp_path):
    """Each path's full repro script of TRIVIAL, all run in one interpreter (the libraries imported once)."""
    scripts = {}
    for name in names:
        text = render(TRIVIAL, name)
        ast.parse(text)
        scripts[name] = tmp_path / f"repro_{name.replace('-', '_')}.py"
        scripts[name].write_text(text)
    proc = subprocess.run([sys.executable, "-c", RUN_SCRIPTS, *map(str, scripts.values())], capture_output=True,
                          text=True, timeout=1800, cwd=tmp_path)
    codes = dict(line.rsplit(" ", 1) for line in proc.stdout.splitlines())
    assert proc.returncode == 0 and len(codes) == len(scripts), proc.stdout[-2000:] + proc.stderr[-2000:]
    for name, script in scripts.items():
        printed = (tmp_path / (script.name + ".out")).read_text()
        assert codes[str(script)] == "0", f"{name}: {printed[-2000:]}"
        assert f"OK: {name} matches the FP64 reference" in printed, name


@pytest.mark.slow
def test_the_representative_paths_write_a_script_that_passes_a_trivial_case(tmp_path):
    _scripts_pass_a_trivial_case(REPRESENTATIVES, tmp_path)


@pytest.mark.slow
@pytest.mark.sweep
def test_every_path_writes_a_script_that_passes_a_trivial_case(tmp_path):
    _scripts_pass_a_trivial_case(paths.default_names(), tmp_path)


def test_normdiff_paths_lists_every_path_with_versions(cli):
    proc = cli("paths")
    assert proc.returncode == 0, proc.stderr
    for name in paths.names():
        assert any(line.startswith(name + " ") for line in proc.stdout.splitlines()), name
    assert "apache-tvm 0.27.0.post1" in proc.stdout and "executorch 1.5.1" in proc.stdout


def test_every_path_says_how_it_trains_and_normdiff_paths_prints_it(cli):
    from harness.commands.paths import describe

    rows = {r["name"]: r for r in describe()}
    for name in paths.default_names():
        path = paths.get(name)
        assert (path.trains is None) == (name == "tvm-decompose-inference"), name  # every other built-in trains
        assert (path.trains or path.cannot_train) and "\n" not in (path.trains or path.cannot_train), name
        assert rows[name]["trains"] == path.trains and rows[name]["cannot_train"] == path.cannot_train
    proc = cli("paths")
    assert proc.returncode == 0, proc.stderr
    assert f"trains: {paths.get('tvm-decompose').trains}" in proc.stdout
    assert f"trains: cannot train: {paths.get('tvm-decompose-inference').cannot_train}" in proc.stdout


def test_an_out_of_tree_path_joins_through_the_environment(cli):
    env = {"NORMDIFF_EXTRA_PATHS": "abort=tests.crashy_paths:AbortPath"}
    proc = cli("paths", env=env)
    assert proc.returncode == 0 and any(line.startswith("abort ") for line in proc.stdout.splitlines())
