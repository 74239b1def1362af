"""What the tests share: the project root, the real command line, small records, baselines and specs.

Tests import from here (`from helpers import …`; pytest puts tests/ on the
path), never from one another.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from harness.spec import CaseSpec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = os.path.join(ROOT, "cases", "seeds")
BASELINE = os.path.join(ROOT, "reports", "baseline.json")
ZOO_BASELINE = os.path.join(ROOT, "reports", "zoo-baseline.json")
CONTEXT_BASELINE = os.path.join(ROOT, "reports", "context-baseline.json")
SHAPES_BASELINE = os.path.join(ROOT, "reports", "shapes-baseline.json")
GRADIENTS_BASELINE = os.path.join(ROOT, "reports", "gradients-baseline.json")

# A check made on every path compiles on all 16 (seconds to a minute each): make test makes it on these, the seeds'
# stacks and eager, and marks the rest `sweep`. `make sweeps` (part of `make bench`) runs every path.
REPRESENTATIVES = ("eager", "tvm-decompose", "executorch-recompose")


def every_path(representatives=REPRESENTATIVES) -> list:
    """paths.default_names() as pytest parameters: `representatives` plain, every other path marked `sweep`."""
    from harness import paths

    return [name if name in representatives else pytest.param(name, marks=pytest.mark.sweep)
            for name in paths.default_names()]


def selected_params(request, name: str) -> set:
    """The values of parameter `name` among the session's selected tests of the requesting module: what a module
    fixture shared by a sweep must run (all of them under `make sweeps`, the representatives under make test)."""
    return {item.callspec.params[name] for item in request.session.items
            if item.module is request.module and hasattr(item, "callspec") and name in item.callspec.params}


def normdiff(*args, cwd=None, timeout=900, env=None):
    """Run the real command line in a fresh interpreter, as a user would."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=timeout, env=full_env)


def normdiff_here(*args, cwd) -> subprocess.CompletedProcess:
    """`harness.commands.main.main(args)` in this process, from the folder `cwd`, with what it prints and
    its exit code in the shape `normdiff` returns. For tests of a usage error, which ends while the
    arguments are read, before anything is written or run, and of a command told to do its work in this
    process (--jobs 0) where the test runs the same work here anyway: a fresh interpreter would only add
    its start (torch's import). `cwd` is the test's own folder: a check that stopped refusing writes there."""
    from harness.commands.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's --help and --version
            code = exc.code
    return subprocess.CompletedProcess(["normdiff", *args], code, out.getvalue(), err.getvalue())


def seed(name: str) -> str:
    """The path of a seed spec under cases/seeds/."""
    return os.path.join(SEEDS, name)


# The misbehaving test paths (tests/crashy_paths.py), as NORMDIFF_EXTRA_PATHS registers them, and their trigger.
CRASHY_PATHS = ("abort=tests.crashy_paths:AbortPath,sleep=tests.crashy_paths:SleepPath,"
                "slow=tests.crashy_paths:SlowPath")
TRIGGER = {"kind": "constant", "value": 7.0}  # tests.crashy_paths.TRIGGER


def small_layer_norm(**changes) -> dict:
    """A float32 layer_norm [2, 16] spec, changed as asked: the runner's tests' cheap case."""
    return {"pattern": "layer_norm", "dtype": "float32", "shape": [2, 16], **changes}


# Small specs, records and baseline entries for the gate and the reports.
SPECS = {name: CaseSpec.from_dict(raw) for name, raw in {
    "a": {"pattern": "layer_norm", "dtype": "float16", "shape": [2, 64]},
    "b": {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
          "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0}},
    "c": {"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 8, 64], "params": {"kind": "normal"}},
    "d": {"pattern": "layer_norm", "style": "manual", "dtype": "bfloat16", "shape": [2, 64]},
    "e": {"pattern": "group_norm", "dtype": "float32", "shape": [2, 8, 4, 4], "groups": 2},
    "f": {"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3]},
}.items()}


def record(name, path, verdict, message=None):
    spec = SPECS[name]
    return {"case_id": spec.case_id, "case": spec.to_dict(), "path": path, "verdict": verdict,
            "stage": "compile" if verdict == "error" else None, "message": message or f"{verdict} on {path}",
            "max_abs_err": None if verdict == "error" else 0.1, "max_rel_err": None, "max_ulp": 3.0,
            "worst_row": 0, "eager_max_abs_err": 1e-4, "out_dtype": spec.dtype, "expected_dtype": spec.dtype,
            "seconds": 0.5, "versions": {"torch": "2.13.0+cpu"}}


def entry(name, path, verdict, upstream="new", reason="a hand-written reason"):
    spec = SPECS[name]
    return {"case_id": spec.case_id, "path": path, "verdict": verdict, "upstream": upstream,
            "reason": reason, "case": spec.to_dict()}


def write_results(tmp_path, records):
    p = tmp_path / "results.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(p)


def write_baseline(tmp_path, entries, name="baseline.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"format": "normdiff-baseline", "version": 1, "entries": entries}, indent=1))
    return str(p)


# A path's intermediates, as attribution reads them and as its repro script reads them.

def hooked_capture(spec, path):
    """The path's own intermediates (`Path.intermediates`, the hook attribution calls) on the case's input."""
    from harness import paths
    from harness.core.tensors import to_torch
    from harness.oracle.inputs import make_inputs
    from harness.oracle.modules import build_module
    from harness.paths.base import input_arrays

    inputs = make_inputs(spec)
    example = tuple(to_torch(a, spec.layout) for a in input_arrays(inputs.run_arg))
    return paths.get(path).intermediates(spec, build_module(spec, inputs.params), example)(inputs.run_arg)


def scripted_intermediates(spec, path):
    """The repro script's `intermediates(model, example, x)`, run from the script's own text."""
    from harness import paths
    from harness.repro import pieces, script

    runner = paths.get(path)
    namespace: dict = {}
    exec("\n".join([pieces.IMPORTS, "from torch import nn\nimport torch.nn.functional as F\n",  # noqa: S102
                    runner.script_imports, pieces.CONVERSIONS, script.input_code(spec), script.model_code(spec),
                    script.path_code(spec, runner)]), namespace)
    example = tuple(namespace["to_torch"](a, spec.layout) for a in namespace["INPUTS"])
    return namespace["intermediates"](namespace["model"], example, namespace["INPUTS"])


def assert_same_intermediates(capture, items, output, rerun):
    """A Capture and a script's (items, output, rerun) hold the same values, bit for bit."""
    assert [(i.name, i.op, i.dtype) for i in capture.intermediates] == [t[:3] for t in items]
    for i, t in zip(capture.intermediates, items):
        assert i.value.dtype == t[3].dtype and i.value.tobytes() == t[3].tobytes(), i.name
    assert capture.output == output and capture.rerun_output.tobytes() == rerun.tobytes()


def grad_case(raw: dict):
    """A gradient case as the engine hands it to a path, made here for a path's own test: (spec, build, example,
    x, expected). `build()` gives a fresh Backward of the case's module (harness.oracle.backward), `example` is
    (x, cotangent) as tensors, `x` the same as NumPy (Prepared.run's argument), and `expected` the gradients
    of float64 autograd on the same module and values, as NumPy, in order (d_x, then each floating parameter's).
    The cotangent is a fixed normal draw in the case's dtype."""
    import numpy as np
    import torch

    from harness.core.tensors import to_numpy, to_torch
    from harness.oracle.backward import Backward
    from harness.oracle.inputs import make_inputs
    from harness.oracle.modules import build_module

    spec = CaseSpec.from_dict({**raw, "grad": True})
    inputs = make_inputs(spec)
    cotangent = np.random.default_rng(7).standard_normal(inputs.x.shape).astype(inputs.x.dtype)
    arrays = (inputs.x, cotangent)
    example = tuple(to_torch(a, spec.layout) for a in arrays)
    wide = Backward(build_module(spec, inputs.params).double(), 1)
    expected = tuple(g.numpy() for g in wide(*(t.double() for t in example)))
    return spec, (lambda: Backward(build_module(spec, inputs.params), 1)), example, arrays, expected


def grad_error(out, expected) -> tuple[float, ...]:
    """The largest error of each gradient against float64's, relative to that gradient's largest magnitude."""
    import numpy as np

    out = out if isinstance(out, tuple) else (out,)
    assert len(out) == len(expected)
    return tuple(float(np.abs(np.asarray(o, np.float64) - e).max() / max(np.abs(e).max(), 1e-30))
                 for o, e in zip(out, expected))


def saved_build(built):
    """What an ExecuTorch path built, comparable across builds: a .pte's bytes, or a saved edge program's members
    but for its nodes' graph ids (the id()s of graphs, which differ from build to build)."""
    import io
    import re
    import zipfile

    if isinstance(built, (bytes, bytearray)):
        return bytes(built)
    from executorch.exir.serde.serialize import save

    buffer = io.BytesIO()
    save(built, buffer)
    members = zipfile.ZipFile(buffer)
    return {n: re.sub(rb'graph_id[\\"]*: \d+', b"graph_id: 0", members.read(n)) for n in members.namelist()}
