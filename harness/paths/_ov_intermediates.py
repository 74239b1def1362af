"""The OpenVINO paths' intermediates: inner nodes of the ov.Model given Results, where that changes nothing.

The path's own pipeline (harness/paths/openvino.py: ov.convert_model, then
compile_model on CPU with the path's config) builds the model; here a Result
is added on the output of inner nodes before compiling, and the compiled
model gives their values beside its own output. The values keep the node's
own element type: a Result adds no Convert, so the plugin is asked for the
node's value as it stores it.

What that can change: the CPU plugin fuses nodes (MVN or Multiply/Add as
post-ops of a reduction or another eltwise node, a Qwen RMSNorm into an RMS
node with its casts dropped, then decomposed again in bf16), and a fused
node's value never exists in memory. Asking for it makes the plugin
compute it apart, often in another precision and beside the fused node,
which still computes the output: the value read would not be the one the
output came from (probed on openvino 2026.4: the Qwen RMSNorm's float32
pow, mean and rsqrt, exposed, run as a float32 copy next to the bf16 RMS).
So a node is read only if the model compiled with its Result runs the same
computing nodes (layer type, runtime precision, number of original ops each
runs, in execution order; Reorders, which move layout or precision, left
out) and gives the same output bits as the model without it; the nodes read
together are checked the same way. The others are reported as fused (not
read): their program stages show as "not computed as such".

The dtype of a value is the output precision of the runtime node that
produced it (Reorders walked back), not its Result's element type: under the
bf16 hint a node typed f32 in the model may be stored in bf16.

The functions below use only numpy, ml_dtypes and openvino, so the OpenVINO
repro scripts carry them as their source (the paths' `pipeline`).
"""
from __future__ import annotations

import numpy as np


def compile_cpu(core, model, config: dict):
    """The model compiled by the CPU plugin of `core` (an ov.Core kept while the model runs) with `config`."""
    return core.compile_model(model, "CPU", config)


def ov_array(tensor):
    """A NumPy copy of an OpenVINO tensor in its own dtype (bf16 as ml_dtypes.bfloat16, from its raw words)."""
    import ml_dtypes
    import openvino as ov

    words = np.array(tensor.data, copy=True)
    if tensor.element_type == ov.Type.bf16:  # OpenVINO shows bf16 data as 16-bit words of another type
        return words.view(np.uint16).view(ml_dtypes.bfloat16)
    return words


def infer_all(compiled, arrays: tuple) -> list:
    """One inference; every output of `compiled`, in the order of compiled.outputs, as NumPy.

    bfloat16 inputs go in as raw 16-bit words of tensors typed bf16.
    """
    import ml_dtypes
    import openvino as ov

    request = compiled.create_infer_request()
    inputs = []
    for a in arrays:
        a = np.ascontiguousarray(a)
        if a.dtype == ml_dtypes.bfloat16:
            tensor = ov.Tensor(ov.Type.bf16, list(a.shape))
            tensor.data.view(np.uint16)[...] = a.view(np.uint16)
            inputs.append(tensor)
        else:
            inputs.append(a)
    request.infer(inputs)
    return [ov_array(request.get_output_tensor(i)) for i in range(len(compiled.outputs))]


def computing_nodes(compiled) -> list:
    """The runtime model's computing nodes in execution order: (layerType, runtimePrecision, ops it runs).

    Inputs, outputs, constants and Reorders (a layout or precision move the
    plugin adds where a value leaves a node) are left out: what is left is
    what the plugin computes, and how many of the model's ops each fuses.
    """
    out = []
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        kind = info["layerType"].astype(str)
        if kind not in ("Input", "Output", "Const", "Reorder"):
            out.append((kind, info["runtimePrecision"].astype(str), len(info["originalLayersNames"].astype(str).split(","))))
    return out


def value_nodes(model) -> list:
    """Friendly names of the model's ops that compute one floating-point value, in topological order."""
    return [op.get_friendly_name() for op in model.get_ordered_ops()
            if op.get_type_name() not in ("Parameter", "Constant", "Result") and op.get_output_size() == 1
            and op.output(0).get_element_type().is_real()]


def with_results(model, names: list):
    """A clone of `model` with a Result (named "read:<node>") on the output of each named node, in order."""
    import openvino as ov

    clone = model.clone()
    nodes = {op.get_friendly_name(): op for op in clone.get_ordered_ops()}
    results = []
    for name in names:
        result = ov.opset13.result(nodes[name].output(0))
        result.set_friendly_name(f"read:{name}")
        results.append(result)
    clone.add_results(results)
    return clone


def stored_dtypes(compiled) -> list:
    """The dtype each output of `compiled` (in compiled.outputs order) was stored in by the node producing it."""
    names = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "f64": "float64"}
    found = {}
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if info["layerType"].astype(str) != "Output":
            continue
        node = op.input_value(0).get_node()
        while node.get_rt_info()["layerType"].astype(str) == "Reorder":
            node = node.input_value(0).get_node()
        precision = node.get_rt_info()["outputPrecisions"].astype(str).split(",")[0]
        found[info["originalLayersNames"].astype(str)] = names.get(precision, precision)
    return [found[output.get_node().get_friendly_name()] for output in compiled.outputs]


def readable_nodes(core, model, config: dict, arrays: tuple):
    """(nodes whose values can be read without changing what the plugin computes, nodes that cannot, `model`
    compiled with a Result on each readable one).

    A set of nodes is readable if `model` compiled with a Result on each runs
    the same computing nodes (computing_nodes) and gives the same output bits
    on `arrays` as `model` compiled as it is: each alone first (most are not:
    the plugin fuses them), then the readable ones together, and added one by
    one in order if together they change it. The compile that decided is the
    one returned (exposed_runner runs it). The nodes giving the model's
    outputs are not among them: each is read anyway, as the model's own
    Result (every output of a model of several).
    """
    base = compile_cpu(core, model, config)
    own = len(model.get_results())  # the model's own outputs come first, the added Results after them
    signature, outputs = computing_nodes(base), [a.tobytes() for a in infer_all(base, arrays)]

    def compiled_unchanged(names):
        """`model` compiled with Results on `names`, or None if that changes what it computes."""
        compiled = compile_cpu(core, with_results(model, names), config)
        same = (computing_nodes(compiled) == signature
                and [a.tobytes() for a in infer_all(compiled, arrays)[:own]] == outputs)
        return compiled if same else None

    returned = {result.input_value(0).get_node().get_friendly_name() for result in model.get_results()}
    candidates = [name for name in value_nodes(model) if name not in returned]
    each = {name: compiled_unchanged([name]) for name in candidates}
    read = [name for name in candidates if each[name] is not None]
    # the model compiled as read: as it is (none), that one compile (one), else all of them together
    compiled = base if not read else each[read[0]] if len(read) == 1 else compiled_unchanged(read)
    if compiled is None:
        alone, read, compiled = read, [], base
        for name in alone:
            more = compiled_unchanged(read + [name])
            if more is not None:
                read, compiled = read + [name], more
    return read, [name for name in candidates if name not in read], compiled


def exposed_runner(core, model, config: dict, arrays: tuple):
    """`model` compiled with a Result on each readable node (readable_nodes on `arrays`); (run, unread).

    run(x), x the inputs as a tuple of NumPy arrays, gives ([(name, op type,
    dtype, value)] in the model's topological order, the readable nodes and the
    node of each of the model's outputs (read from its own Result), the index
    of the first output's, the re-run's output: a tuple of them for several);
    `unread` names the nodes the plugin fused, which cannot be read without
    changing what it computes.
    """
    read, unread, compiled = readable_nodes(core, model, config, arrays)
    own = len(model.get_results())  # the model's own outputs come first, the added Results after them
    outputs = [result.input_value(0).get_node() for result in model.get_results()]
    order = {op.get_friendly_name(): k for k, op in enumerate(model.get_ordered_ops())}
    types = {op.get_friendly_name(): op.get_type_name() for op in model.get_ordered_ops()}
    dtypes = stored_dtypes(compiled)
    # where each value comes from among the compiled model's outputs: a model output's node from its first Result
    # (two outputs of one node are one value), a read node from its added Result
    source = {}
    for k, node in enumerate(outputs):
        source.setdefault(node.get_friendly_name(), k)
    source.update({name: own + k for k, name in enumerate(read)})
    names = sorted(source, key=lambda name: order[name])
    first = names.index(outputs[0].get_friendly_name())

    def run(x):
        values = infer_all(compiled, x)
        found = [(name, types[name], dtypes[source[name]], values[source[name]]) for name in names]
        return found, first, values[0] if own == 1 else tuple(values[:own])  # several: each

    return run, unread


METHOD = "inner nodes of the ov.Model given Results where that leaves the compiled model's nodes and output unchanged"
