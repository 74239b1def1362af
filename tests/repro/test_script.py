"""`normdiff repro`: standalone scripts, run in fresh interpreters with the real libraries.

The fast tests check that each piece of a script is what normdiff runs: the
inputs are the very bytes harness/oracle/inputs.py draws, the model exports the very
graph of harness/oracle/modules.py's module, the reference is harness/oracle/reference.py's, the
check is check_code's (the comparator's rule, as the short script's), and the script
imports nothing of normdiff. The slow ones run the scripts of the seeds.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import torch

from cases import bugs
from harness import paths
from harness.oracle.inputs import make_inputs
from harness.oracle.modules import build_module
from cases.suites import SEED_EXECUTORCH, SEED_TVM
from harness.repro import pieces as repro_templates, script as repro_script
from harness.repro.check_code import check_code
from harness.oracle.reference import reference
from harness.spec import INPUT_KINDS, CaseSpec
from harness.core.tensors import to_torch
from helpers import ROOT, seed

# The standard library: a script may import any of it (it runs wherever Python does).
STANDARD = set(sys.stdlib_module_names)
# A distribution's import name where the two differ.
IMPORT_NAMES = {"apache-tvm": "tvm", "iree-base-compiler": "iree", "iree-base-runtime": "iree", "iree-turbine": "iree"}


def _specs_every_input_kind():
    for kind in INPUT_KINDS:
        for pattern, shape in (("layer_norm", [2, 64]), ("group_norm", [2, 8, 3, 3])):
            yield {"pattern": pattern, "dtype": "bfloat16", "shape": shape, "input": {"kind": kind},
                   "params": {"kind": "normal"}, "seed": 7, **({"groups": 2} if pattern == "group_norm" else {})}
    yield {"pattern": "batch_norm", "dtype": "float16", "weight_dtype": "float32", "shape": [2, 4, 5],
           "params": {"kind": "normal"}, "seed": 3}
    yield {"pattern": "batch_norm", "dtype": "float32", "shape": [3, 4], "affine": "none"}
    yield {"pattern": "instance_norm", "dtype": "float16", "shape": [2, 4, 16]}
    yield {"pattern": "rms_norm", "dtype": "float16", "shape": [1, 4096], "input": {"kind": "outlier"}}


def _exec(*sections: str) -> dict:
    namespace: dict = {}
    exec("\n".join(sections), namespace)  # noqa: S102 - the generated code under test
    return namespace


def _prelude() -> str:
    return repro_templates.IMPORTS + "from torch import nn\nimport torch.nn.functional as F\n" + repro_templates.CONVERSIONS


@pytest.mark.parametrize("raw", list(_specs_every_input_kind()), ids=lambda r: f"{r['pattern']}-{r['input']['kind'] if 'input' in r else 'normal'}-{r['dtype']}")
def test_script_inputs_are_normdiffs_bytes(raw):
    spec = CaseSpec.from_dict(raw)
    ns = _exec(_prelude(), repro_script.input_code(spec))  # the script's own digest assert runs too
    inputs = make_inputs(spec)
    assert ns["x"].dtype == inputs.x.dtype
    np.testing.assert_array_equal(ns["x"].view(np.uint8), inputs.x.view(np.uint8))
    for name, value in inputs.params.items():
        assert ns[name].dtype == value.dtype
        np.testing.assert_array_equal(ns[name].view(np.uint8), value.view(np.uint8))


def _style_specs():
    base = {"pattern": "rms_norm", "shape": [2, 3, 32], "params": {"kind": "normal"}}
    for style in ("qwen", "llama", "t5", "gemma"):
        for cast in ("to", "float", "type_as", "to_contiguous"):
            yield {**base, "style": style, "cast": cast, "dtype": "float16"}
        yield {**base, "style": style, "dtype": "bfloat16", "affine": "none"}
        yield {**base, "style": style, "dtype": "float16", "weight_dtype": "float32"}
    for style in ("upcast", "manual"):
        for dtype in ("float16", "bfloat16"):
            yield {"pattern": "layer_norm", "style": style, "dtype": dtype, "shape": [2, 32],
                   "params": {"kind": "normal"}}
    yield {"pattern": "layer_norm", "style": "upcast", "cast": "to_contiguous", "dtype": "float16",
           "shape": [2, 32], "affine": "weight"}
    for pattern, shape, extra in (("layer_norm", [2, 32], {}), ("rms_norm", [2, 32], {}),
                                  ("group_norm", [2, 4, 3, 3], {"groups": 2}),
                                  ("instance_norm", [2, 4, 3, 3], {}), ("batch_norm", [2, 4, 3, 3], {}),
                                  ("batch_norm", [2, 4, 3], {}), ("instance_norm", [1, 2, 2, 2, 3], {})):
        yield {"pattern": pattern, "dtype": "float16", "shape": shape, "params": {"kind": "normal"}, **extra}
    yield {"pattern": "group_norm", "dtype": "float32", "shape": [2, 4, 3, 3], "groups": 2,
           "layout": "channels_last", "affine": "none"}


def _graph(module, example) -> str:
    """The exported graph: every node, its target, arguments and name (the inputs' and parameters' too)."""
    return str(torch.export.export(module, (example,)).graph)


@pytest.mark.parametrize("raw", list(_style_specs()),
                         ids=lambda r: f"{r['pattern']}-{r.get('style', 'module')}-{r.get('cast')}-{r['dtype']}"
                                       f"-{r.get('weight_dtype', '')}-{r.get('affine', '')}")
def test_script_model_and_reference_are_normdiffs(raw):
    """The written-out model gives eager's bits and the same exported graph; the reference is normdiff's."""
    spec = CaseSpec.from_dict(raw)
    ns = _exec(_prelude(), repro_script.input_code(spec), repro_script.model_code(spec),
               repro_script.reference_code(spec))
    inputs = make_inputs(spec)
    ours = build_module(spec, inputs.params)
    example = to_torch(inputs.x, spec.layout)
    with torch.no_grad():
        want, got = ours(example), ns["model"](example)
    assert got.dtype == want.dtype
    assert torch.equal(got.view(torch.int16 if got.element_size() == 2 else torch.int32),
                       want.view(torch.int16 if want.element_size() == 2 else torch.int32))
    assert _graph(ns["model"], example) == _graph(ours, example)
    np.testing.assert_allclose(ns["ref"], reference(spec, inputs).out, rtol=1e-13, atol=1e-300)


FUSED_ADD = {"pattern": "rms_norm", "dtype": "bfloat16", "shape": [4, 64], "params": {"kind": "normal"},
             "inputs": {"r": {"kind": "normal"}},
             "program": "h = x.float() + r.float()\nv = h.pow(2).mean(-1, keepdim=True)\n"
                        "normed = (h * torch.rsqrt(v + eps)).to(x.dtype) * w\nreturn normed, h.to(x.dtype)"}


@pytest.mark.parametrize("raw, path", [(SEED_TVM, "tvm-decompose"), (SEED_TVM, "eager"), (SEED_EXECUTORCH, "tvm"),
                                       (list(_specs_every_input_kind())[-3], "onnxruntime"), (FUSED_ADD, "eager"),
                                       (FUSED_ADD, "executorch-recompose")])
def test_the_full_script_decides_with_the_short_scripts_check(raw, path):
    """One decision: the full script pastes check_code's check (the comparator's rule; tests/repro/
    test_check_code.py holds it to compare.score), for a case of several outputs one per output."""
    spec = CaseSpec.from_dict(raw)
    ref = reference(spec, make_inputs(spec))
    text = repro_script.render(spec, path)
    expected = "EXPECTED_DTYPE" if path == "eager" else "eager.dtype"
    if not ref.outputs:
        assert check_code(spec, ref, path, expected) in text
    for k, (r, name) in enumerate(zip(ref.each, ref.output_names) if ref.outputs else ()):
        assert check_code(spec, r, path, f"{expected}[{k}]" if path == "eager" else expected, k, name) in text
    assert "tolerance: |out - ref| <=" not in text and "by_row(" not in text  # no plain envelope any more
    ast.parse(text)


@pytest.mark.parametrize("path", paths.default_names())
def test_script_imports_only_the_libraries(path):
    spec = CaseSpec.from_dict({**SEED_EXECUTORCH, "style": "t5"})
    text = repro_script.render(spec, path)
    tree = ast.parse(text)
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add(node.module.split(".")[0])
    libraries = {IMPORT_NAMES.get(d, d) for d in paths.get(path).packages}
    allowed = STANDARD | {"ml_dtypes", "numpy", "torch"} | libraries
    assert roots <= allowed, roots - allowed
    assert "harness" not in text.split('"""', 2)[2] and "normdiff" not in roots
    # the script runs the library under test itself (a path's helper packages, such as onnxscript
    # behind torch.onnx, need no import of their own)
    assert not (libraries - {"torch"}) or (libraries - {"torch"}) & roots


def test_two_generations_are_byte_identical(cli, cli_here, tmp_path):
    """One in a fresh interpreter, one in this process: the same bytes in any process."""
    first, second = tmp_path / "a.py", tmp_path / "b.py"
    for run, target in ((cli, first), (cli_here, second)):
        proc = run("repro", "tvm-20909", "-o", str(target))
        assert proc.returncode == 0, proc.stderr
    assert first.read_bytes() == second.read_bytes()
    bug = bugs.get("tvm-20909")
    assert first.read_text() == repro_script.render(bug.specs[0], bug.paths[0], bug=bug)
    # stdout is the same script
    proc = cli_here("repro", "tvm-20909")
    assert proc.returncode == 0 and proc.stdout == first.read_text()


@pytest.mark.parametrize("args,message", [
    (["tvm-99999"], "is not a bug id"),
    (["tvm-20909", "--path", "nope"], "unknown path 'nope'"),
    ([seed("tvm-20909.json")], "needs --path"),
    (["0123456789ab", "--results", "does/not/exist.jsonl"], "no results file"),
])
def test_bad_usage_is_one_line_exit_2(cli_here, args, message):
    proc = cli_here("repro", *args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_spec_file_with_two_specs_is_refused(cli_here, tmp_path):
    f = tmp_path / "two.jsonl"
    f.write_text(json.dumps(SEED_TVM) + "\n" + json.dumps(SEED_EXECUTORCH) + "\n")
    proc = cli_here("repro", str(f), "--path", "tvm")
    assert proc.returncode == 2 and "holds 2 specs" in proc.stderr


def _run_script(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600,
                          cwd=os.path.dirname(str(path)))


@pytest.mark.slow
def test_tvm_20909_script_reproduces_the_seed(cli_here, tmp_path):
    script = tmp_path / "r.py"
    proc = cli_here("repro", "tvm-20909", "-o", str(script))
    assert proc.returncode == 0, proc.stderr
    run = _run_script(script)
    assert run.returncode == 1, run.stdout + run.stderr
    out = run.stdout
    assert "tvm-decompose (float16): [-1.4140625, 1.4140625, -1.4140625, 1.4140625]" in out
    assert "expected, rounded to float16: [-1.0, 1.0, -1.0, 1.0]" in out
    assert "max abs error: tvm-decompose 0.414142" in out and "rows failing: 1 of 1" in out
    assert "dtypes: tvm-decompose returns float16, expected float16" in out
    assert "apache-tvm 0.27" in out and "Python 3." in out and "CPU:" in out
    assert "FAIL: rows beyond normdiff's check" in out


@pytest.mark.slow
def test_executorch_seed_from_a_case_id_in_real_results(cli, cli_here, tmp_path):
    """A nightly failure becomes a script in one command: run, then repro CASE_ID."""
    case = tmp_path / "seed.json"
    case.write_text(json.dumps(SEED_EXECUTORCH))
    out_dir = tmp_path / "out"
    proc = cli("run", "--case", str(case), "--paths", "eager,executorch-recompose", "--jobs", "0",
               "--quiet", "--out", str(out_dir))
    assert proc.returncode == 1, proc.stderr
    case_id = CaseSpec.from_dict(SEED_EXECUTORCH).case_id
    script = tmp_path / "et.py"
    proc = cli_here("repro", case_id, "--results", str(out_dir / "results.jsonl"), "-o", str(script))
    assert proc.returncode == 0, proc.stderr
    text = script.read_text()
    assert "Path: executorch-recompose:" in text and "Recorded: dtype_mismatch" in text
    run = _run_script(script)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "'rms_norm_built': True, 'rms_norm_input_dtype': 'float32'" in run.stdout
    assert "dtypes: executorch-recompose returns float32, expected float16" in run.stdout
    assert "FAIL: output dtype float32, expected float16" in run.stdout
    assert "executorch 1.5" in run.stdout


@pytest.mark.slow
def test_script_of_a_passing_case_exits_0(cli_here, tmp_path):
    """The seed compiled without DecomposeOpsForTraining is right: its script passes."""
    script = tmp_path / "ok.py"
    proc = cli_here("repro", os.path.join(ROOT, "cases", "seeds", "tvm-20909.json"), "--path", "tvm",
               "-o", str(script))
    assert proc.returncode == 0, proc.stderr
    run = _run_script(script)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "tvm (float16): [-1.0, 1.0, -1.0, 1.0]" in run.stdout
    assert "OK: tvm matches the FP64 reference" in run.stdout


@pytest.mark.slow
def test_script_of_a_finding_under_the_bound_fails_as_normdiff_does(cli_here, tmp_path):
    """tvm-decompose on a benign bfloat16 row of 8192: under the bound, but beyond what float32 achieves."""
    raw = {"pattern": "layer_norm", "dtype": "bfloat16", "shape": [2, 8192]}
    spec = CaseSpec.from_dict(raw)
    from harness.engine.execute import Executor
    record = Executor().execute(spec, "tvm-decompose")
    assert record["verdict"] == "inaccurate" and record["max_err_over_tol"] < 1, record["message"]
    case = tmp_path / "case.json"
    case.write_text(json.dumps(raw))
    script = tmp_path / "under.py"
    assert cli_here("repro", str(case), "--path", "tvm-decompose", "-o", str(script)).returncode == 0
    run = _run_script(script)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "what normdiff's float32 witnesses (correct implementations) err there" in script.read_text()
    assert "FAIL: rows beyond normdiff's check" in run.stdout


@pytest.mark.slow
def test_script_of_a_compile_error_exits_1_with_the_error(cli_here, tmp_path):
    script = tmp_path / "bf16.py"
    assert cli_here("repro", "tvm-new-bf16-layer-norm", "-o", str(script)).returncode == 0
    run = _run_script(script)
    assert run.returncode == 1
    assert "only support float32 and float16" in run.stdout + run.stderr
    assert "FAIL: tvm raised" in run.stdout


SHADOWING = {"onnxruntime.py": "onnxruntime", "torch.py": "eager", "tvm.py": "tvm"}  # file name: path


@pytest.mark.slow
def test_a_script_named_after_the_library_it_imports_runs_as_any_other(cli_here, tmp_path):
    """onnxruntime.py, torch.py and tvm.py side by side: each imports the real library, not itself
    nor its siblings (Python puts the script's folder first on sys.path; the script takes it off)."""
    seed_file = os.path.join(ROOT, "cases", "seeds", "tvm-20909.json")
    for name, path in SHADOWING.items():
        assert cli_here("repro", seed_file, "--path", path, "-o", str(tmp_path / name)).returncode == 0
    for name, path in SHADOWING.items():
        run = _run_script(tmp_path / name)
        text = run.stdout + run.stderr
        assert "partially initialized" not in text and "has no attribute" not in text, text[-3000:]
        assert "ImportError" not in text and "ModuleNotFoundError" not in text, text[-3000:]
        verdict = run.stdout.strip().splitlines()[-1]  # the script's own verdict on the finding
        assert (run.returncode, verdict.split(":")[0]) in ((0, "OK"), (1, "FAIL")), text[-3000:]
        assert f"path: {path}:" in run.stdout
    assert sorted(os.listdir(tmp_path)) == sorted(SHADOWING)  # and nothing compiled beside them


def test_a_script_written_into_a_folder_gets_a_name_no_import_can_mean(tmp_path):
    for umask, mode in ((0o022, 0o755), (0o077, 0o700)):
        folder = tmp_path / oct(umask)
        folder.mkdir()
        proc = subprocess.run([sys.executable, "-m", "harness", "repro", "tvm-20909", "-o", str(folder)],
                              cwd=ROOT, umask=umask, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        (name,) = os.listdir(folder)
        bug = bugs.get("tvm-20909")
        assert name == f"repro-{bug.specs[0].case_id}-{bug.paths[0]}.py" and not name[:-3].isidentifier()
        assert str(folder / name) in proc.stderr
        assert os.stat(folder / name).st_mode & 0o777 == mode  # executable, as the umask allows


def test_bfloat16_inputs_use_ml_dtypes():
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "bfloat16", "shape": [2, 8]})
    ns = _exec(_prelude(), repro_script.input_code(spec))
    assert ns["x"].dtype == np.dtype(ml_dtypes.bfloat16)


def test_a_gradient_cases_script_builds_the_backward_every_path_compiles():
    import inspect

    from harness.oracle import backward
    from harness.spec import CaseSpec

    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [4, 16], "grad": True})
    text = repro_script.render(spec, "tvm-decompose")
    defined = {n.name: n for n in ast.parse(text).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for obj in (backward.floating_parameters, backward.Backward, backward.joint_graph):  # pasted, never copied
        assert ast.get_source_segment(text, defined[obj.__name__]) + "\n" == inspect.getsource(obj)
    assert "model = Backward(model, 1)" in text and "is_backward" in defined  # the path's flow takes it
    namespace = {"torch": torch, "nn": torch.nn, "model": torch.nn.LayerNorm(16)}
    exec(repro_script.backward_code(spec), namespace)  # the script's model piece, on a module of its own
    x, cotangent = torch.randn(4, 16), torch.randn(4, 16)
    got, want = namespace["model"](x, cotangent), backward.Backward(torch.nn.LayerNorm(16), 1)(x, cotangent)
    assert len(got) == 3 and all(torch.equal(a, b) for a, b in zip(got, want))


def test_a_compiled_path_is_held_to_the_measured_tolerance_in_plain_form():
    # a long float32 row: the measured tolerance is far tighter than the bound, and the
    # plain form still covers it everywhere
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 4096]})
    ref = reference(spec, make_inputs(spec))
    rtol, atol, note = repro_script.plain_tolerance(spec, compiled=True)
    measured = compare.measured_tolerance(ref)
    plain = atol + rtol * np.abs(ref.out)
    assert np.all(plain >= measured)
    assert np.median(plain / tolerance(ref)) < 0.5
    assert "correct float32 implementations" in note
    assert repro_script.plain_tolerance(spec) != (rtol, atol, note)  # eager: the bound


def test_a_symbolic_case_s_script_compiles_its_dims_symbolic_once_and_runs_the_size_it_failed_at(tmp_path):
    """DYNAMIC is what the path's calls take (harness.paths.base.dynamic_of): the script's export of a symbolic
    case is the path's symbolic export, at the case's own size; a static case's script passes None."""
    from harness.paths.base import dynamic_of
    from harness.spec import CaseSpec

    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [3, 8], "dynamic": [0],
                               "dynamic_max": 64})
    text = repro_script.render(spec, "executorch-recompose-capture")
    assert "\nDYNAMIC = ((0,), 64)\n" in text and "SHAPE = (3, 8)" in text
    assert "export_program(model, example, DYNAMIC)" in text
    import types

    module = types.ModuleType("repro_symbolic")  # importable while it runs, as a script's __main__ is
    sys.modules[module.__name__] = module
    try:
        exec(compile(text, "repro.py", "exec"), module.__dict__)  # noqa: S102 - its definitions (main not run)
    finally:
        del sys.modules[module.__name__]
    namespace = module.__dict__
    assert namespace["DYNAMIC"] == dynamic_of(spec)
    example = tuple(namespace["to_torch"](a, spec.layout) for a in namespace["INPUTS"])
    ep = namespace["export_program"](namespace["model"], example, namespace["DYNAMIC"])
    assert [str(r) for r in ep.range_constraints.values()] == ["VR[1, 64]"]
    assert "\nDYNAMIC = None  # static shapes" in repro_script.render(spec.static(), "executorch-recompose-capture")
