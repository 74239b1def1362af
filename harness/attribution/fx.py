"""The intermediates of an FX graph, read by running it node by node.

The ExecuTorch recompose paths and `eager` run an FX graph module in Python,
op by op: torch.fx.Interpreter runs the very same ops on the very same
tensors as the module's generated forward, so every node's value is what
the path computed; nothing is added to the graph and nothing is fused that
was not (eager is read through torch.export of the module, whose ATen ops
are the module's kernels; the re-run's output is checked against eager's).

A whole norm node (aten.layer_norm, aten.rms_norm, aten.group_norm) keeps its
statistics inside its kernel. They are read by calling the kernel's own
entry that also returns them (native_layer_norm, _fused_rms_norm,
native_group_norm, which aten's norms dispatch to on CPU) on the same
arguments, and kept only when that call's output is bit-identical to the
node's (else they may not be the node's, and the norm stays one stage).
Statistics a kernel returns in a dtype narrower than float32 (its float32
values rounded for returning, as native_layer_norm does for float16) are
not exposed: they are not what it computed with.
"""
from __future__ import annotations

import operator
import warnings

from harness.attribution.capture import Capture, Intermediate
from harness.core.dtypes import name_of
from harness.core.tensors import to_numpy

# The items of a norm kernel's tuple after the output, by what they hold.
_ITEMS = {"native_layer_norm": ("mean", "rsqrt"), "native_group_norm": ("mean", "rsqrt"),
          "_fused_rms_norm": ("rsqrt",), "var_mean": ("mean",)}
_NORM_KERNELS = ("native_layer_norm", "native_group_norm", "_fused_rms_norm")
_NARROW = ("float16", "bfloat16")


def _short(op: str) -> str:
    parts = op.split(".")
    return parts[1] if len(parts) > 2 else parts[-1]


def _stats_call(op: str, args, kwargs):
    """(kernel name, the kernel's full tuple) of a whole norm node, or None for other ops."""
    import torch

    aten = torch.ops.aten
    short = _short(op)
    if short == "layer_norm" and not kwargs:
        x, shape, w, b, eps = (list(args) + [None, None, 1e-5])[:5]
        return "native_layer_norm", aten.native_layer_norm.default(x, shape, w, b, eps)
    if short == "rms_norm" and not kwargs:
        x, shape, w, eps = (list(args) + [None, None])[:4]
        return "_fused_rms_norm", aten._fused_rms_norm.default(x, shape, w, eps)
    if short == "group_norm" and not kwargs:
        x, groups, w, b, eps = (list(args) + [None, None, 1e-5])[:5]
        n, c = x.shape[0], x.shape[1]
        return "native_group_norm", aten.native_group_norm.default(x, w, b, n, c, x[0, 0].numel(), groups, eps)
    return None


class _Recorder:
    """Runs a graph module with torch.fx.Interpreter, keeping every call_function node's tensors."""

    def __init__(self, graph_module, op_name):
        import torch

        self.inters: list[Intermediate] = []
        self.index: dict[str, int] = {}
        self.changes: list[str] = []
        recorder = self

        class Interpreter(torch.fx.Interpreter):
            def run_node(self, node):
                result = super().run_node(node)
                if node.op == "call_function" and node.target is operator.getitem:
                    recorder.alias(node)
                elif node.op == "call_function":
                    args, kwargs = self.fetch_args_kwargs_from_env(node)
                    recorder.keep(node, op_name(node.target), result, args, kwargs)
                return result

        self.interpreter = Interpreter(graph_module)

    def alias(self, node):
        """A tuple item taken out is the item already kept: index it under the getitem's name."""
        src, i = node.args[0], node.args[1]
        if f"{src.name}[{i}]" in self.index:
            self.index[node.name] = self.index[f"{src.name}[{i}]"]

    def add(self, name, op, tensor):
        import torch

        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
            self.index.setdefault(name, len(self.inters))
            self.inters.append(Intermediate(name, op, name_of(tensor.dtype), to_numpy(tensor)))

    def keep(self, node, op, result, args, kwargs):
        import torch

        if isinstance(result, (tuple, list)):
            self._items(node.name, op, _short(op), list(result))
            return
        self.add(node.name, op, result)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stats = _stats_call(op, args, kwargs)
        if stats is None:
            return
        kernel, full = stats
        if isinstance(full[0], torch.Tensor) and full[0].dtype == result.dtype and torch.equal(full[0], result):
            self._items(node.name, f"aten.{kernel}.default", kernel, [None, *full[1:]])

    def _items(self, name, op, short, items):
        labels = _ITEMS.get(short, ())
        for i, item in enumerate(items):
            if i == 0:
                self.add(f"{name}[0]", op, item)
                continue
            label = labels[i - 1] if i - 1 < len(labels) else str(i)
            if short in _NORM_KERNELS and getattr(item, "dtype", None) is not None and name_of(item.dtype) in _NARROW:
                continue  # float32 statistics rounded for returning: not what the kernel used
            self.add(f"{name}[{i}]", f"{op}#{label}" if labels else f"{op}#{i}", item)


def _output_name(graph_module) -> str | None:
    import torch

    node = next(n for n in graph_module.graph.nodes if n.op == "output")
    out = node.args[0]
    while isinstance(out, (tuple, list)) and len(out) == 1:
        out = out[0]
    if isinstance(out, torch.fx.Node):
        return out.name
    return None


def capture(graph_module, args, method: str) -> Capture:
    """Run `graph_module` on `args` (torch tensors) node by node, keeping every intermediate."""
    import torch

    from harness.paths._executorch_common import op_name

    recorder = _Recorder(graph_module, op_name)
    with torch.no_grad():
        result = recorder.interpreter.run(*args)
    while isinstance(result, (tuple, list)) and len(result) == 1:
        result = result[0]
    name = _output_name(graph_module)
    output = recorder.index.get(name, recorder.index.get(f"{name}[0]")) if name else None
    rerun = to_numpy(result) if isinstance(result, torch.Tensor) else None
    return Capture(recorder.inters, output, rerun, method, recorder.changes)


def prepare_recompose(path, module, example):
    """The recompose paths' rewritten graph (the path's own rewrite, repeated): fn(example) -> Capture."""
    import torch

    from harness.paths import executorch_recompose as recompose
    from harness.paths._executorch_common import quiet_imports

    quiet_imports()
    with torch.no_grad():
        ep = torch.export.export(module, example)
    if isinstance(path, recompose.RecomposeCapturePath):
        graph_module = ep.module()
        recompose.rewrite(graph_module, quantization_capture=True)
    else:
        from executorch.exir import EdgeCompileConfig, to_edge

        config = EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=path.skip_dim_order)
        edge_ep = to_edge(ep, compile_config=config).exported_program()
        recompose.rewrite(edge_ep.graph_module, quantization_capture=False)
        graph_module = edge_ep.module()
    return lambda args: capture(graph_module, args, "the rewritten graph run node by node (torch.fx.Interpreter)")


def prepare_eager(module, example):
    """eager's ops, read from torch.export of the module: fn(example) -> Capture."""
    import torch

    with torch.no_grad():
        graph_module = torch.export.export(module, example).module()
    return lambda args: capture(graph_module, args, "torch.export of the module run node by node (torch.fx.Interpreter)")
