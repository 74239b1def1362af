"""An out-of-tree path written only against the public plug-in face (docs/contracts.md §6), intermediates hook included.

`Float16StoragePath` is a small "compiler" with a precision bug of its own:
it runs the exported graph node by node and stores every float32 value a
node computes in float16 (as a kernel library that keeps its buffers in
half precision would), so a float16 model's float32 statistics lose their
precision. Its `intermediates` runs the same graph the same way and hands
back every stored value, so attribution can say which stage lost it.
Register with harness.paths.register(name, "tests.plugin_paths:Float16StoragePath")
or NORMDIFF_EXTRA_PATHS; workers import this module by that name.
"""
from __future__ import annotations

import torch

from harness.core.tensors import single, to_numpy, to_torch
from harness.paths.base import Capture, Intermediate, Path, Prepared, example_args, input_arrays

METHOD = "the exported graph run node by node, float32 values stored in float16"


def _graph(module, example):
    with torch.no_grad():
        return torch.export.export(module, example_args(example)).module()


def _run(graph_module, tensors, keep=None):
    """The graph's output, every float32 node value rounded through float16; `keep(node, value)` sees each."""

    class Float16Storage(torch.fx.Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            if node.op == "call_function" and isinstance(result, torch.Tensor) and result.is_floating_point():
                if result.dtype == torch.float32:
                    result = result.half().float()
                if keep is not None:
                    keep(node, result)
            return result

    with torch.no_grad():
        return single(Float16Storage(graph_module).run(*tensors))


class Float16StoragePath(Path):
    name = "float16-storage"
    description = "torch.export -> the graph run node by node, float32 values stored in float16"
    packages = ("torch",)

    def prepare(self, spec, module, example) -> Prepared:
        graph_module = _graph(module, example)

        def run(x):
            return to_numpy(_run(graph_module, tuple(to_torch(a, spec.layout) for a in input_arrays(x))))

        return Prepared(run, {"stores": "float16"})

    def intermediates(self, spec, module, example):
        graph_module = _graph(module, example)
        returned = single(next(n for n in graph_module.graph.nodes if n.op == "output").args[0]).name

        def run(x) -> Capture:
            found, index = [], {}

            def keep(node, value):
                stored = value.half() if value.dtype == torch.float32 else value
                index[node.name] = len(found)
                found.append(Intermediate(node.name, str(node.target), str(stored.dtype).removeprefix("torch."),
                                          to_numpy(stored)))

            out = _run(graph_module, tuple(to_torch(a, spec.layout) for a in input_arrays(x)), keep)
            return Capture(found, index.get(returned), to_numpy(out), METHOD)

        return run


class PerCasePath(Float16StoragePath):
    """As Float16StoragePath, with an artifact per case: its own `structure_key` (the face's hook)."""

    name = "float16-storage-per-case"

    def structure_key(self, spec) -> str:
        return f"case-{spec.case_id}"


def _symbolic_graph(spec, module, example):
    """torch.export with the spec's dynamic dims of x as torch.export Dims in [1, spec.dynamic_max]."""
    args = example_args(example)
    dims = {d: torch.export.Dim(f"d{d}", min=1, max=spec.dynamic_max) for d in spec.dynamic}
    shapes = (dims, *(None for _ in args[1:]))
    with torch.no_grad():
        return torch.export.export(module, args, dynamic_shapes=shapes).module()


class SymbolicFloat16StoragePath(Float16StoragePath):
    """Float16StoragePath compiled once with symbolic dims: its float16 storage fails at every size, static too."""
    name = "float16-storage-symbolic"
    symbolic = "torch.export Dim"

    def prepare(self, spec, module, example) -> Prepared:
        graph_module = _symbolic_graph(spec, module, example) if spec.dynamic else _graph(module, example)

        def run(x):
            return to_numpy(_run(graph_module, tuple(to_torch(a, spec.layout) for a in input_arrays(x))))

        return Prepared(run, {"stores": "float16", "compiles": 1})


class SizeHintPath(SymbolicFloat16StoragePath):
    """A kernel picked for the size it was compiled at (the hint): at that size it runs in the graph's own dtypes,
    at any other size a generic kernel stores its float32 values in float16 (the class of pytorch/pytorch#106747:
    a strategy chosen from a size hint, reused at every size). Its failures are symbolic only."""
    name = "size-hint"

    def prepare(self, spec, module, example) -> Prepared:
        graph_module = _symbolic_graph(spec, module, example) if spec.dynamic else _graph(module, example)
        hint = tuple(example_args(example)[0].shape)

        def run(x):
            tensors = tuple(to_torch(a, spec.layout) for a in input_arrays(x))
            if tuple(tensors[0].shape) == hint:
                with torch.no_grad():
                    return to_numpy(single(graph_module(*tensors)))
            return to_numpy(_run(graph_module, tensors))

        return Prepared(run, {"hint": list(hint), "compiles": 1})


class AbsentLibraryPath(Float16StoragePath):
    """The same path, said to run a library that is not installed: what a command refuses to run on."""
    name = "absent-library"
    packages = ("normdiff-no-such-distribution",)
