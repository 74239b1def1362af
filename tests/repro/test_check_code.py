"""The short script's check (harness/repro/check_code.py) decides as normdiff's comparator does.

Each case's short script is run with its path call replaced by outputs the
test hands it: the FP64 reference rounded to the output dtype, eager's own
output and (a program) its witnesses' outputs, all correct, must pass; the
rounded reference pushed off at one element by a few multiples of normdiff's
tolerance there must get the verdict harness.oracle.compare.score gives it.
The cases: a program judged against its witnesses (iree-new-fp16-mean), a
batch_norm in eval mode judged by the bound (openvino-new-batch-norm-fp16)
and a catalog layer_norm judged against its witnesses.
"""
from __future__ import annotations

import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from cases import bugs
from harness.core.dtypes import np_dtype
from harness.core.verdicts import Verdict
from harness.oracle.compare import measured_tolerance, score, tolerance
from harness.oracle.inputs import make_inputs
from harness.oracle.reference import reference
from harness.repro.check_code import literal, up
from harness.repro.short_script import RUN, render_short

FACTORS = (0.5, 2.0, 8.0, 64.0)  # multiples of normdiff's tolerance at the element pushed off


def test_up_never_rounds_below_and_literal_keeps_one_number_for_equal_rows():
    for v in (1e-7, 0.123456, 3.0, 0.0999999):
        assert v <= up(v) <= v * 1.01
    assert up(0.0) == 0.0
    assert literal([0.25, 0.25], "A", "why") == "A = 0.25  # why"
    assert literal([0.25, 0.5], "A", "why", column=True) == "# why\nA = np.array([0.25, 0.5])[:, None]"
    assert literal([0.25, 0.5] * 20, "A", "why").startswith("# why\nA = np.array([\n    0.25, 0.5, 0.25,")
    # most rows at one value (the floor): that value, then the few others
    floor = [0.0837] * 40
    floor[3], floor[30] = 0.143, 0.1
    text = literal(floor, "A", "why")
    assert text == "A = np.full(40, 0.0837)  # why\nA[[3, 30]] = 0.143, 0.1"
    namespace = {"np": np}
    exec(text, namespace)  # noqa: S102 - the generated literal under test
    assert namespace["A"].tolist() == floor


def _candidates(spec, ref) -> list[np.ndarray]:
    dtype = np_dtype(ref.out_dtype)
    rounded = ref.out.astype(dtype)
    tol = measured_tolerance(ref)
    tol = tolerance(ref) if tol is None else tol
    outs = [rounded, *(w.astype(dtype) for w in (ref.witness_outputs() if ref.witness_outputs else ()))]
    at = int(np.argmax(np.abs(ref.out).reshape(-1)))  # the largest output: every term of the bound counts there
    for factor in FACTORS:
        out = rounded.copy()
        out.reshape(-1)[at] = ref.out.reshape(-1)[at] + factor * tol.reshape(-1)[at]
        outs.append(out)
    return outs


@pytest.mark.parametrize("bug_id, path", [("iree-new-fp16-mean", "iree"), ("openvino-new-batch-norm-fp16", "openvino"),
                                          ("executorch-new-layer-norm-half", "executorch")])
def test_the_scripts_check_passes_correct_outputs_and_decides_as_normdiff(tmp_path, bug_id, path):
    bug = bugs.get(bug_id)
    spec = bug.specs[0]
    ref = reference(spec, make_inputs(spec))
    script = render_short(spec, path, bug.title)
    head, run, _ = script.partition(RUN)
    assert run, "the script runs its path in one line"
    files = []
    for i, out in enumerate(_candidates(spec, ref)):
        files.append(str(tmp_path / f"out{i}.npy"))
        np.save(files[-1], out)
    # everything before the path runs (inputs, model, reference, check, eager), then the check on each output
    tail = ("np.save(EAGER, eager)\nfor out in [eager.copy(), *(np.load(f) for f in FILES)]:\n"
            "    print('decision', check(out, eager))\n")
    text = head + f"EAGER, FILES = {str(tmp_path / 'eager.npy')!r}, {files!r}\n" + tail
    (tmp_path / "check.py").write_text(text, encoding="utf-8")
    done = subprocess.run([sys.executable, "check.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    decisions = [int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("decision ")]
    eager = np.load(tmp_path / "eager.npy")
    outs = [eager, *(np.load(f) for f in files)]
    verdicts = [score(out, ref, eager).verdict for out in outs]
    assert decisions == [int(v != Verdict.PASS) for v in verdicts]
    correct = 2 + (len(ref.witness_outputs()) if ref.witness_outputs else 0)  # eager, the rounded reference, witnesses
    assert decisions[:correct] == [0] * correct
    assert decisions[-1] == 1 and 0 in decisions[correct:]  # a small push passes, a large one fails


FUSED_ADD = {"pattern": "rms_norm", "dtype": "bfloat16", "shape": [4, 64], "params": {"kind": "normal"},
             "inputs": {"r": {"kind": "normal"}},
             "program": "h = x.float() + r.float()\nv = h.pow(2).mean(-1, keepdim=True)\n"
                        "normed = (h * torch.rsqrt(v + eps)).to(x.dtype) * w\nreturn normed, h.to(x.dtype)"}


def test_a_case_of_several_outputs_holds_each_to_its_own_check(tmp_path):
    """`return normed, h`: the shared check, with each output's reference and thresholds (THRESHOLDS), decides
    as compare.score does on that output (harness.oracle.outputs.score_each scores each so)."""
    from harness.spec import CaseSpec

    spec = CaseSpec.from_dict(FUSED_ADD)
    ref = reference(spec, make_inputs(spec))
    script = render_short(spec, "executorch-recompose", "two outputs")
    head, run, _ = script.partition(RUN)
    assert run and "def check(out, eager, ref, name, " in head and "THRESHOLDS = {" in head and "check_0" not in head
    names = list(ref.output_names)
    files = {}
    for k, r in enumerate(ref.each):
        for i, out in enumerate(_candidates(spec, r)):
            files[(k, i)] = str(tmp_path / f"out{k}_{i}.npy")
            np.save(files[(k, i)], out.view(np.uint16))  # bfloat16 as its bits (.npy has no bfloat16)
    tail = ("for k, e in enumerate(eagers):\n    np.save(f'{EAGER}{k}.npy', e.view(np.uint16))\n"
            "for (k, i), f in FILES.items():\n"
            "    print('decision', k, i, check(np.load(f).view(eagers[k].dtype), eagers[k], ref[k], NAMES[k], "
            "**THRESHOLDS[NAMES[k]]))\n")
    text = head + f"EAGER, FILES, NAMES = {str(tmp_path / 'eager')!r}, {files!r}, {names!r}\n" + tail
    (tmp_path / "check.py").write_text(text, encoding="utf-8")
    done = subprocess.run([sys.executable, "check.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    decisions = {(int(k), int(i)): int(d) for _, k, i, d in
                 (line.split() for line in done.stdout.splitlines() if line.startswith("decision "))}
    assert set(decisions) == set(files)
    bits = lambda f: np.load(f).view(ml_dtypes.bfloat16)
    for (k, i), f in files.items():
        verdict = score(bits(f), ref.each[k], bits(tmp_path / f"eager{k}.npy")).verdict
        assert decisions[(k, i)] == int(verdict != Verdict.PASS), (k, i)
    last = max(i for _, i in files)
    assert {decisions[(k, 0)] for k in range(2)} == {0}  # each rounded reference passes its own check
    assert {decisions[(k, last)] for k in range(2)} == {1}  # and 64x its tolerance off fails it
