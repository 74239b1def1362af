"""The intermediates of an FX graph, read by running it node by node (eager and the recompose paths).

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
not exposed: they are not what it computed with. Unless the graph reads
them: in torch's joint graph of a gradient case, native_layer_norm's float16
mean and rstd are what native_layer_norm_backward computes with (saved in
the input's dtype on CPU), so there they are the values to score.

`fx_intermediates` uses only torch and the conversions of
harness/core/tensors.py, so the repro scripts of eager and the recompose
paths carry it as its source (it is in their `pipeline`): the script's
stage table reads the very values attribution reads.
"""
from __future__ import annotations

from harness.core.tensors import single, to_numpy, to_torch
from harness.paths._executorch_common import op_name
from harness.paths.base import Capture, Intermediate, input_arrays


def fx_intermediates(graph_module, example):
    """Run an FX graph module on `example` (a tuple of tensors) node by node, keeping every node's value.

    Returns ([(name, op, dtype, value)], index of the value the graph
    returns among them or None, the re-run's output as NumPy or None).
    """
    import warnings

    import torch

    aten = torch.ops.aten
    # The items of a norm kernel's tuple after the output, by what they hold.
    labels_of = {"native_layer_norm": ("mean", "rsqrt"), "native_group_norm": ("mean", "rsqrt"),
                 "_fused_rms_norm": ("rsqrt",), "var_mean": ("mean",)}
    norm_kernels = ("native_layer_norm", "native_group_norm", "_fused_rms_norm")
    found, index = [], {}

    def short(op):
        parts = op.split(".")
        return parts[1] if len(parts) > 2 else parts[-1]

    def add(name, op, t):
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            index.setdefault(name, len(found))
            found.append((name, op, str(t.dtype).removeprefix("torch."), to_numpy(t)))

    def items(name, op, kernel, values, read=None):
        """A tuple's items; `read`: the indices some node of the graph reads (None: a whole norm's statistics)."""
        labels = labels_of.get(kernel, ())
        for i, t in enumerate(values):
            stat = kernel in norm_kernels and i > 0
            if stat and getattr(t, "dtype", None) in (torch.float16, torch.bfloat16) and i not in (read or ()):
                continue  # float32 statistics rounded for returning, which no node reads: not what was used
            if read is not None and i not in read and not stat:
                continue  # what no node reads (a joint graph's forward output): not a value computed with
            if i == 0:
                add(f"{name}[0]", op, t)
                continue
            label = labels[i - 1] if i - 1 < len(labels) else str(i)
            add(f"{name}[{i}]", f"{op}#{label}" if labels else f"{op}#{i}", t)

    def statistics(op, args, kwargs):
        """(kernel name, the kernel's full tuple) of a whole norm node, or None for other ops."""
        s = short(op)
        if kwargs:
            return None
        # 1e-5 is aten's own default of an omitted eps, written out here because this function is pasted
        # into standalone repro scripts, which import nothing but torch, numpy and the library under test.
        if s == "layer_norm":
            x, shape, w, b, eps = (list(args) + [None, None, 1e-5])[:5]
            return "native_layer_norm", aten.native_layer_norm.default(x, shape, w, b, eps)
        if s == "rms_norm":
            x, shape, w, eps = (list(args) + [None, None])[:4]
            return "_fused_rms_norm", aten._fused_rms_norm.default(x, shape, w, eps)
        if s == "group_norm":
            x, groups, w, b, eps = (list(args) + [None, None, 1e-5])[:5]
            return "native_group_norm", aten.native_group_norm.default(x, w, b, x.shape[0], x.shape[1],
                                                                       x[0, 0].numel(), groups, eps)
        return None

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            if node.op != "call_function":
                return result
            op = op_name(node.target)
            if op == "getitem":  # a tuple item taken out is the item already kept: index it under this name
                key = f"{node.args[0].name}[{node.args[1]}]"
                if key in index:
                    index[node.name] = index[key]
                return result
            if isinstance(result, (tuple, list)):  # the items some node reads (a backward reads saved statistics)
                read = {u.args[1] for u in node.users if op_name(u.target) == "getitem" and u.users}
                items(node.name, op, short(op), list(result), read)
                return result
            add(node.name, op, result)
            args, kwargs = self.fetch_args_kwargs_from_env(node)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                full = statistics(op, args, kwargs)
            if (full is not None and isinstance(full[1][0], torch.Tensor) and full[1][0].dtype == result.dtype
                    and torch.equal(full[1][0], result)):
                items(node.name, f"aten.{full[0]}.default", full[0], [None, *full[1][1:]])
            return result

    with torch.no_grad():
        rerun = single(Recorder(graph_module).run(*example))
    returned = single(next(n for n in graph_module.graph.nodes if n.op == "output").args[0])
    if isinstance(returned, (tuple, list)) and returned:  # several outputs: the first is the one indexed
        returned = returned[0]
    name = returned.name if isinstance(returned, torch.fx.Node) else None
    output = index.get(name, index.get(f"{name}[0]")) if name else None
    tensors = isinstance(rerun, torch.Tensor) or (
        isinstance(rerun, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in rerun))
    return found, output, to_numpy(rerun) if tensors else None


def capture(graph_module, example, method: str) -> Capture:
    """`fx_intermediates` as a Capture."""
    found, output, rerun = fx_intermediates(graph_module, example)
    return Capture([Intermediate(*item) for item in found], output, rerun, method)


INTERPRETED = "{} run node by node (torch.fx.Interpreter)"  # a Capture's method, of what was run


def fx_runner(graph_module, spec, method: str):
    """A path's `intermediates` runner over an FX graph module: run(x) -> Capture, x as Prepared.run takes it."""
    return lambda x: capture(graph_module, tuple(to_torch(a, spec.layout) for a in input_arrays(x)), method)
