"""The plug-in face (harness/paths/base.py): each path's pipeline written once, and its capabilities declared.

A repro script pastes the functions its path runs (`Path.pipeline`) by their
source: the fast test reads the written script with `ast` and finds each of
them there exactly as `inspect.getsource` gives it, every one of them reached
from the script's `run_path` (or `intermediates`); the slow one runs each
path live, records which functions ran, and runs the script's `run_path` on
the same case: the same functions, the same bits.
"""
from __future__ import annotations

import ast
import inspect
import sys

import numpy as np
import pytest
import torch

from harness import paths
from harness.core.tensors import to_torch
from harness.engine.execute import Executor
from harness.oracle.inputs import make_inputs
from harness.oracle.modules import build_module
from harness.paths.base import Path, example_args, export_program, input_arrays, symbolic_range
from harness.repro import script as repro_script
from harness.spec import CaseSpec
from helpers import every_path

QWEN = {"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 4, 32], "params": {"kind": "normal"}}
PLUGIN = "tests.plugin_paths:Float16StoragePath"


def _functions(text: str) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in ast.parse(text).body if isinstance(node, ast.FunctionDef)}


def _reached(functions: dict[str, ast.FunctionDef], roots) -> set[str]:
    """The module-level functions the `roots` call, directly or through each other."""
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        todo += [n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name) and n.id in functions]
    return seen


@pytest.mark.parametrize("path", paths.default_names())
def test_a_repro_script_pastes_the_very_functions_its_path_runs(path):
    runner = paths.get(path)
    spec = CaseSpec.from_dict(QWEN)
    text = repro_script.render(spec, path)
    functions = _functions(text)
    assert runner.pipeline, f"{path} declares no pipeline"
    for fn in runner.pipeline:
        assert fn.__name__ in functions, f"{path}: the script does not define {fn.__name__}"
        assert ast.get_source_segment(text, functions[fn.__name__]) + "\n" == inspect.getsource(fn), fn.__name__
    roots = ["run_path"] + (["intermediates"] if runner.has_intermediates else [])
    assert set(roots) <= set(functions)
    unreached = {fn.__name__ for fn in runner.pipeline} - _reached(functions, roots)
    assert not unreached, f"{path}: pasted, never called: {unreached}"
    # the stage table exactly where the path declares intermediates (the script's, from the same pipeline)
    assert ("intermediates" in functions) == runner.has_intermediates == ("def print_stage_table" in text)


def test_the_built_in_paths_declare_what_the_engine_may_do_with_them():
    declared = {name: (p.takes_shared_export, p.artifact_cacheable, p.restore_takes_build, p.has_intermediates)
                for name in paths.default_names() for p in [paths.get(name)]}
    assert declared["eager"] == (False, False, False, True)
    assert declared["inductor"] == declared["inductor-emulate"] == (False, True, True, False)
    for name in ("tvm", "tvm-decompose", "tvm-decompose-inference", "executorch-recompose",
                 "executorch-recompose-no-dim-order", "executorch-recompose-capture"):
        assert declared[name] == (True, True, False, True), name
    for name in ("executorch", "executorch-xnnpack", "onnxruntime", "onnxruntime-fused"):
        assert declared[name] == (True, True, False, False), name
    for name in paths.default_names():  # a declared capability is implemented
        cls = type(paths.get(name))
        assert ("exported" in inspect.signature(cls.prepare).parameters) == cls.takes_shared_export, name
        assert ("build" in inspect.signature(cls.restore).parameters) == cls.restore_takes_build, name
        assert (cls.intermediates is not Path.intermediates) == cls.has_intermediates, name


def test_a_path_written_to_the_older_face_runs_uncached_and_exports_itself(tmp_path, monkeypatch):
    """No declarations: the defaults (False) leave it as it ran before they existed: called without the
    runner's export, never cached, its script the default run_path and no stage table."""
    from harness.engine.cache import ArtifactCache

    monkeypatch.delenv(paths.ENV, raising=False)
    paths.register("float16-storage", PLUGIN)
    runner = paths.get("float16-storage")
    assert not (runner.takes_shared_export or runner.artifact_cacheable or runner.restore_takes_build
                or runner.has_intermediates) and runner.pipeline == ()
    record = Executor(cache=ArtifactCache(str(tmp_path))).execute(CaseSpec.from_dict(QWEN), "float16-storage")
    assert record["verdict"] == "pass" and record["artifact_cache"] == "unsupported", record["message"]
    text = repro_script.render(CaseSpec.from_dict(QWEN), "float16-storage")
    assert "def run_path(" in text and "def print_stage_table" not in text


class _Residual(torch.nn.Module):
    """A norm of x + r, scaled by w: r has x's shape, w one of its own."""

    def forward(self, x, r, w):
        return torch.nn.functional.layer_norm(x + r, (8,)) * w


def test_a_symbolic_export_bounds_the_dims_and_shares_them_with_an_input_of_xs_shape():
    w = torch.randn(8)
    ep = export_program(_Residual(), (torch.randn(2, 3, 8), torch.randn(2, 3, 8), w), ((1,), 100))
    assert symbolic_range(ep) == [1, 100]
    users = set(ep.graph_signature.user_inputs)
    shapes = [tuple(str(d) for d in n.meta["val"].shape) for n in ep.graph.nodes if n.name in users]
    assert shapes[0] == shapes[1] and shapes[0][1] not in ("3", "8") and shapes[2] == ("8",)
    assert export_program(_Residual(), (torch.randn(2, 3, 8),) * 2 + (w,)).range_constraints == {}  # static
    # a size-1 example is not specialised (size-oblivious): the program runs other sizes
    one = export_program(_Residual(), (torch.randn(2, 1, 8), torch.randn(2, 1, 8), w), ((1,), 100))
    x, r = torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    assert torch.equal(one.module()(x, r, w), _Residual()(x, r, w))


def test_where_torch_refuses_a_size_of_1_the_symbolic_range_starts_at_2():
    norm = torch.nn.InstanceNorm1d(4).eval()  # "more than 1 spatial element": a guard on the length
    assert symbolic_range(export_program(norm, (torch.randn(1, 4, 7),), ((2,), 100))) == [2, 100]


def _live(path: str, spec: CaseSpec):
    """The path's output on the case, prepared and run as the runner does it, and the code objects that ran
    (its intermediates built and run too, where it has them)."""
    inputs = make_inputs(spec)
    module = build_module(spec, inputs.params)
    example = tuple(to_torch(a, spec.layout) for a in input_arrays(inputs.run_arg))
    runner = paths.get(path)
    ran: set = set()

    def profile(frame, event, arg):
        if event == "call":
            ran.add(frame.f_code)

    sys.setprofile(profile)
    try:
        prepared = runner.prepare(spec, module, example if len(example) > 1 else example[0])
        out = prepared.run(inputs.run_arg)
        if runner.has_intermediates:
            runner.intermediates(spec, module, example_args(example))(inputs.run_arg)
    finally:
        sys.setprofile(None)
    return out, ran


def _scripted(path: str, spec: CaseSpec) -> np.ndarray:
    """The script's run_path on the case, from the script's own text (its main() not run)."""
    import types

    # a module of its own, importable while it runs, as a script's __main__ is (strict exports look its classes up)
    module = types.ModuleType(f"repro_script_{path.replace('-', '_')}")
    sys.modules[module.__name__] = module
    try:
        exec(compile(repro_script.render(spec, path), f"repro-{path}.py", "exec"), module.__dict__)  # noqa: S102
        example = tuple(module.to_torch(a, spec.layout) for a in module.INPUTS)
        return module.run_path(module.model, example, module.INPUTS)
    finally:
        del sys.modules[module.__name__]


def _live_gradient(path: str) -> set:
    """The code objects a small float32 gradient case runs on the path (a path that trains): its training flow.
    A stack that refuses torch's joint graph raises its own error; what ran before it counts."""
    from helpers import grad_case

    from harness.paths.base import StageError, Unsupported

    # a layer norm written out: Relax differentiates its ops without a decomposition (`tvm`: nn.layer_norm it cannot)
    spec, build, example, x, _ = grad_case({"pattern": "layer_norm", "style": "manual", "dtype": "float32",
                                            "shape": [2, 16]})
    ran: set = set()

    def profile(frame, event, arg):
        if event == "call":
            ran.add(frame.f_code)

    sys.setprofile(profile)
    try:
        paths.get(path).prepare(spec, build(), example).run(x)
    except (StageError, Unsupported):
        pass
    finally:
        sys.setprofile(None)
    return ran


@pytest.mark.slow
@pytest.mark.parametrize("path", every_path())
def test_the_live_path_runs_its_pipeline_and_its_script_gives_the_same_bits(path):
    import torch

    ran_either: set = set()
    # static, then symbolic (its dim 1): the symbolic pieces (symbolic_shapes, marked_dynamic, partial_shapes)
    # run only in the second, and a script's DYNAMIC makes its run_path compile as the live path does
    for spec in (CaseSpec.from_dict(QWEN), CaseSpec.from_dict({**QWEN, "dynamic": [1]})):
        with torch.compiler.config.patch(force_disable_caches=path.startswith("inductor")):  # the plain compile
            live, ran = _live(path, spec)
        ran_either |= ran
        scripted = _scripted(path, spec)
        assert scripted.dtype == live.dtype and scripted.tobytes() == live.tobytes(), spec
    if paths.get(path).trains:  # a gradient case runs the rest of the pipeline: the path's training flow
        with torch.compiler.config.patch(force_disable_caches=path.startswith("inductor")):
            ran_either |= _live_gradient(path)
    not_run = {fn.__name__ for fn in paths.get(path).pipeline if fn.__code__ not in ran_either}
    assert not not_run, f"{path}: the script pastes functions the live path does not run: {not_run}"


def test_the_shared_export_of_a_backward_is_torchs_joint_graph():
    import torch

    from harness.oracle.backward import Backward
    from harness.paths._backward import backward_ops
    from harness.paths.base import export_program, is_backward

    norm = torch.nn.LayerNorm(16)
    example = (torch.randn(4, 16), torch.randn(4, 16))  # x, then the cotangent
    backward = Backward(norm, 1)
    assert is_backward(backward) and not is_backward(norm)
    ep = export_program(backward, example)
    assert backward_ops(ep.graph) == ["aten.native_layer_norm_backward.default"]
    assert [s.kind.name for s in ep.graph_signature.input_specs].count("USER_INPUT") == 2
    grads = ep.module()(*example)
    for got, want in zip(grads, backward(*example)):
        assert torch.equal(got, want)
    assert backward_ops(export_program(norm, example[:1]).graph) == []  # a forward module: its forward
