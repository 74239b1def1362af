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
environment) and ends with the check that fails, exit 1, while the bug is
present.
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

REPORT = '''\
# -- the check: normdiff's tolerance for this case and path, in a plain form
#    |out - ref| <= ATOL + RTOL * |ref|   ($tolerance_note)
PATH = "$path"
IS_EAGER = $is_eager  # else the path is held to eager's dtype and to 2x eager's error
EXPECTED_DTYPE = $expected_dtype  # torch's type promotion for this model
RTOL = $rtol
ATOL = $atol
EAGER_MULTIPLIER = 2.0
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


def errors(y):
    \"\"\"|y - ref| where y is finite (0 elsewhere), and where y is not finite.\"\"\"
    y64 = np.asarray(y).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(y64 - ref)
    return np.where(np.isfinite(y64), err, 0.0), ~np.isfinite(y64)


def check(out, eager, expected_dtype):
    \"\"\"The problems with `out`, in normdiff's order: shape, dtype, non-finite, accuracy.\"\"\"
    if out.shape != ref.shape:
        return [f"output shape {out.shape}, expected {ref.shape}"]
    problems = []
    err, nonfinite = errors(out)
    eager_err, eager_nonfinite = errors(eager)
    worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape))
    print(f"max abs error vs FP64: {PATH} {err.max():.6g} at {worst}, eager {eager_err.max():.6g}")
    print(f"tolerance: |out - ref| <= {ATOL!r} + {RTOL!r} * |ref|")
    if out.dtype != expected_dtype:
        problems.append(f"output dtype {out.dtype}, expected {expected_dtype}")
    with np.errstate(over="ignore"):
        ref_finite = np.isfinite(ref.astype(out.dtype).astype(np.float64))
    bad = nonfinite & ref_finite
    if not IS_EAGER:
        bad &= ~eager_nonfinite  # eager's own non-finite values are not the path's
    if bad.any():
        problems.append(f"{int(bad.sum())} non-finite outputs where the reference is finite")
    tol = ATOL + RTOL * np.abs(ref)
    over = err > tol
    if IS_EAGER and over.any():
        problems.append(f"{int(over.sum())} of {over.size} outputs over the tolerance, "
                        f"max abs error {err.max():.6g}")
    elif over.any():  # per normalization row, in units of the tolerance: worse than 2x eager there?
        worse = by_row(over).any(1) & (by_row(err / tol).max(1) > EAGER_MULTIPLIER * by_row(eager_err / tol).max(1))
        if worse.any():
            problems.append(f"{int(worse.sum())} of {worse.size} rows over the tolerance and over "
                            f"{EAGER_MULTIPLIER:g}x eager's error there (in units of the tolerance), "
                            f"max abs error {err.max():.6g}")
    return problems


def by_row(a):
    """`a` (the output's shape) as one line per normalization row normdiff scores."""
    return $rows_view


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
        problems = check(out, eager, expected_dtype)
        if problems and "print_stage_table" in globals():  # which stage lost it (a path that exposes them)
            try:
                print_stage_table(model, example, INPUTS, out, out.dtype != expected_dtype)
            except Exception as exc:  # the table is extra: the check still decides
                print(f"stage table unavailable: {first_line(exc)}")
    if problems:
        print("FAIL: " + "; ".join(problems))
        raise AssertionError("; ".join(problems))
    print(f"OK: {PATH} matches the FP64 reference within the tolerance")


if __name__ == "__main__":
    main()
'''


# A case of several outputs (`return y, r`, a forward returning a tuple): EXPECTED_DTYPE, RTOL and ATOL hold one
# value per output, and main checks each output against its own reference with `check`, one at a time.
MAIN_SEVERAL = '''\
def main():
    global ref, RTOL, ATOL  # `check` reads them: set to each output's in turn
    environment()
    print("case:", $case_repr)
    print(f"path: {PATH}:", $description_repr)
    example = tuple(to_torch(a, $layout) for a in INPUTS)
    with torch.no_grad():
        eager = to_numpy(model(*example))
    refs, rtols, atols = ref, RTOL, ATOL
    try:
        out = run_path(model, example, INPUTS)
    except Exception as exc:  # the failure is the finding: show it, then fail
        traceback.print_exc()
        problems = [f"{PATH} raised {first_line(exc)}"]
    else:
        out = out if isinstance(out, tuple) else (out,)
        problems = [] if len(out) == len(refs) else [f"{PATH} returned {len(out)} outputs, the model {len(refs)}"]
        for name, o, e, r, rtol, atol, dtype in zip(OUTPUT_NAMES, out, eager, refs, rtols, atols, EXPECTED_DTYPE):
            ref, RTOL, ATOL = r, rtol, atol
            expected_dtype = dtype if IS_EAGER else e.dtype
            print(f"output {name}: expected (FP64 reference):", first(ref))
            print(f"output {name}: eager ({e.dtype}):", first(e))
            print(f"output {name}: {PATH} ({o.dtype}):", first(o))
            problems += [f"output {name}: {p}" for p in check(o, e, expected_dtype)]
    if problems:
        print("FAIL: " + "; ".join(problems))
        raise AssertionError("; ".join(problems))
    print(f"OK: {PATH} matches the FP64 reference within the tolerance on every output")


if __name__ == "__main__":
    main()
'''
REPORT_SEVERAL = (REPORT[:REPORT.index("def main():")].replace(
    "EXPECTED_DTYPE = $expected_dtype  # torch's type promotion for this model",
    "EXPECTED_DTYPE = $expected_dtype  # torch's type promotion for this model, per output\nOUTPUT_NAMES = $names")
    + MAIN_SEVERAL)
