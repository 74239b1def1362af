"""Plain-text pieces of a standalone reproduction script (`normdiff repro`).

The script imports only torch, numpy, ml_dtypes and the library under test
(tvm or executorch), never normdiff, so it can be pasted into an upstream
report as it is. `harness.repro.script` fills these pieces in for one case
and one path; `$name` fields are filled with `string.Template`. Code that
normdiff runs too (the conversions) is pasted from its one definition with
inspect.getsource, never copied as text.

Each path's own piece comes from its module in harness/paths/
(`Path.script_imports`, `Path.script_code`): the functions the path runs
(its `pipeline`), pasted by their source, and a short `run_path` calling
them; the report piece prints what a maintainer asks for first (expected and actual values, the error, both dtypes, the
environment) and decides with normdiff's check (harness.repro.check_code, the
one every script pastes): exit 1 while the bug is present.
"""
from __future__ import annotations

import inspect

from harness.core import tensors
from harness.oracle import inputs as draws
from harness.program import ir

HEADER = '''\
#!/usr/bin/env python3
"""$title

$body
"""
'''

# First of all, the script's own folder leaves sys.path (Python puts it first): saved as
# torch.py, tvm.py or onnxruntime.py, the script would otherwise import itself instead of
# the library, and so would any sibling file named like one. os and sys are already loaded.
IMPORTS = '''\
import os
import sys

if "__file__" in globals():  # this file's folder off sys.path: the script must not import itself
    _here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _here]

import hashlib
import importlib.metadata
import platform
import traceback
import zlib

import ml_dtypes
import numpy as np
import torch
'''

# The conversions normdiff itself uses, pasted by their source (one definition: harness/core/tensors.py).
CONVERSIONS = "\n\n".join(inspect.getsource(f) for f in (tensors.to_torch, tensors.to_numpy, tensors.single))

# How normdiff draws its streams and a program's (or a module's) named parameters, pasted by their source
# (one definition: harness/oracle/inputs.py and harness/program/ir.py).
DRAWS = "\n\n".join(inspect.getsource(f) for f in (draws._rng, ir.ones_value, draws.draw_named_params))

INPUTS = '''\
# -- inputs: drawn in float64 with NumPy's PCG64 and rounded to the case dtypes,
#    exactly as normdiff draws them (the digest below checks every bit)
SHAPE = $shape
SEED = $seed
DTYPE = $np_dtype
WEIGHT_DTYPE = $np_weight_dtype


$draws


def rng(stream, name=None):
    return _rng(SEED, stream, name)


$draw_x
x = x64.reshape(SHAPE).astype(DTYPE)
$draw_params
INPUT_SHA256 = "$digest"
_digest = hashlib.sha256()
for _a in ($digest_tuple):
    _digest.update(np.ascontiguousarray(_a).tobytes())
assert _digest.hexdigest() == INPUT_SHA256, "the inputs differ from normdiff's"
INPUTS = ($input_tuple)  # the model's inputs, in its argument order
'''

# -- the report and the check -----------------------------------------------
# `$check` is normdiff's check (harness.repro.check_code, the one every script pastes): `check(out, eager)`, or one
# `check_K` per output of several; the rest prints what a maintainer asks for first.

REPORT = '''\
PATH = "$path"
IS_EAGER = $is_eager  # else the path is held to eager's dtype and judged against eager's error
EXPECTED_DTYPE = $expected_dtype  # torch's type promotion for this model
LIBRARIES = $libraries


def environment():
    versions = []
    for dist in LIBRARIES:
        try:
            versions.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{dist} (not installed)")
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    print("environment:", ", ".join(versions))
    print(f"  Python {platform.python_version()}, {platform.platform()}, CPU: {cpu}")


def first(a, k=4):
    return [float(v) for v in np.asarray(a).reshape(-1)[:k]]


def first_line(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def problem(out, ref, expected_dtype):
    \"\"\"What a failing check found, in normdiff's order: the shape, the dtype, then the rows.\"\"\"
    if out.shape != ref.shape:
        return f"output shape {out.shape}, expected {ref.shape}"
    if out.dtype != expected_dtype:
        return f"output dtype {out.dtype}, expected {expected_dtype}"
    return "rows beyond normdiff's check (the line above): over 2x eager's error there and the allowance"


def stage_table(out, dtype_problem, model, example):
    if "print_stage_table" in globals():  # which stage lost it (a path that exposes them)
        try:
            print_stage_table(model, example, INPUTS, out, dtype_problem)
        except Exception as exc:  # the table is extra: the check still decides
            print(f"stage table unavailable: {first_line(exc)}")


$check
'''

MAIN = '''\
def main():
    environment()
    print("case:", $case_repr)
    print(f"path: {PATH}:", $description_repr)
    example = tuple(to_torch(a, $layout) for a in INPUTS)
    with torch.no_grad():
        eager = to_numpy(model(*example))
    expected_dtype = EXPECTED_DTYPE if IS_EAGER else eager.dtype
    print("expected (FP64 reference):", first(ref))
    print(f"expected, rounded to {expected_dtype}:", first(ref.astype(expected_dtype)))
    print(f"eager ({eager.dtype}):", first(eager))
    try:
        out = run_path(model, example, INPUTS)
    except Exception as exc:  # the failure is the finding: show it, then fail
        traceback.print_exc()
        problems = [f"{PATH} raised {first_line(exc)}"]
    else:
        print(f"{PATH} ({out.dtype}):", first(out))
        print(f"dtypes: {PATH} returns {out.dtype}, expected {expected_dtype}")
        problems = [problem(out, ref, expected_dtype)] if check(out, eager) else []
        if problems:
            stage_table(out, out.dtype != expected_dtype, model, example)
    if problems:
        print("FAIL: " + "; ".join(problems))
        raise SystemExit(1)
    print(f"OK: {PATH} matches the FP64 reference within normdiff's check")


if __name__ == "__main__":
    main()
'''

# A case of several outputs (`return y, r`, a forward returning a tuple): EXPECTED_DTYPE holds one dtype per
# output, `ref` one reference per output, and each output is held to its own `check_K`.
MAIN_SEVERAL = '''\
OUTPUT_NAMES = $names
CHECKS = $checks  # one per output: its own reference and thresholds


def main():
    environment()
    print("case:", $case_repr)
    print(f"path: {PATH}:", $description_repr)
    example = tuple(to_torch(a, $layout) for a in INPUTS)
    with torch.no_grad():
        eager = to_numpy(model(*example))
    try:
        out = run_path(model, example, INPUTS)
    except Exception as exc:  # the failure is the finding: show it, then fail
        traceback.print_exc()
        problems = [f"{PATH} raised {first_line(exc)}"]
    else:
        out = out if isinstance(out, tuple) else (out,)
        problems = [] if len(out) == len(ref) else [f"{PATH} returned {len(out)} outputs, the model {len(ref)}"]
        dtype_problem = False
        for name, o, e, r, dtype, check in zip(OUTPUT_NAMES, out, eager, ref, EXPECTED_DTYPE, CHECKS):
            expected_dtype = dtype if IS_EAGER else e.dtype
            print(f"output {name}: expected (FP64 reference):", first(r))
            print(f"output {name}: eager ({e.dtype}):", first(e))
            print(f"output {name}: {PATH} ({o.dtype}):", first(o))
            if check(o, e):
                problems.append(f"output {name}: {problem(o, r, expected_dtype)}")
                dtype_problem = dtype_problem or o.dtype != expected_dtype
        if problems:
            stage_table(out, dtype_problem, model, example)
    if problems:
        print("FAIL: " + "; ".join(problems))
        raise SystemExit(1)
    print(f"OK: {PATH} matches the FP64 reference within normdiff's check on every output")


if __name__ == "__main__":
    main()
'''
