"""`executorch-recompose*`: the Qualcomm backend's RmsNorm recomposition, run in Python.

QNN's to_edge pipeline (QnnPassManager.transform_for_to_edge_pipeline) runs
RemoveRedundancy() before RecomposeRmsNorm() (the dependency table says so)
on the edge graph, both with their default arguments; its quantizer runs
them with quantization_capture=True on the captured ATen graph
(transform_for_annotation_pipeline). These paths run just those two passes,
without the QNN SDK, and execute the rewritten graph in Python, so a wrong
rewrite shows up as a wrong value or dtype (seed: pytorch/executorch#24428,
where a float16 Qwen/Llama norm is rebuilt on its float32 upcast and the
output comes back float32).

    executorch-recompose               to_edge (dim order on), edge passes
    executorch-recompose-no-dim-order  to_edge(_skip_dim_order=True), edge passes
    executorch-recompose-capture       the exported ATen graph (ep.module()),
                                       passes with quantization_capture=True

The persistent artifact cache keeps the rewritten edge program (ExecuTorch's
serializer, torch.export.save's format with the edge dialect's ops); for
-capture, the exported program its passes rewrite (ep.module() and the two
passes take milliseconds). A restored graph runs bit for bit as the built one.

Facts:
    rms_norm_built        the pass built an rms_norm node
    rms_norm_input_dtype  dtype of the tensor that node reads (meta["val"]), or null
    rms_norm_nodes        rms_norm nodes in the rewritten graph (built or not)
    dropped_casts         dtype-changing casts RemoveRedundancy removed
                          ("float16->float32"); a dropped cast changes the math
"""
from __future__ import annotations

import io

from harness.paths._backward import joint_facts
from harness.paths._frontend_memo import shared_provenance
from harness.paths._executorch_common import (
    EXECUTORCH_WARM,
    call_ops,
    decomposed_once,
    dtype_of,
    export,
    graph_output,
    module_runner,
    op_name,
    quiet_imports,
)
from harness.paths import _fx_intermediates as fx
from harness.paths.base import (Path, Prepared, export_program, is_backward, stage, symbolic_export, symbolic_facts,
                                symbolic_shapes)


def rewrite(graph_module, quantization_capture: bool) -> dict:
    """RemoveRedundancy then RecomposeRmsNorm on `graph_module`, in place; the facts. The targets come from the
    passes themselves: the ops RemoveRedundancy may drop (`redundant_ops`), the rms_norm RecomposeRmsNorm builds
    (`rms_norm_target`), so the script that pastes this copies nothing of the library."""
    from executorch.backends.qualcomm._passes import RecomposeRmsNorm, RemoveRedundancy

    remove, recompose = RemoveRedundancy(quantization_capture), RecomposeRmsNorm(quantization_capture)
    nodes, norm = graph_module.graph.nodes, recompose.rms_norm_target  # the graph's nodes, as they are now
    casts = {n: (dtype_of(n.args[0]), dtype_of(n)) for n in nodes if n.target in remove.redundant_ops and n.args}
    remove(graph_module)
    alive, before = set(nodes), {n for n in nodes if n.target == norm}
    recompose(graph_module)
    built = [n for n in nodes if n.target == norm and n not in before]
    return {"rms_norm_built": bool(built), "rms_norm_input_dtype": dtype_of(built[0].args[0]) if built else None,
            "rms_norm_nodes": sum(n.target == norm for n in nodes), "dropped_casts": sorted(  # new math
                f"{a}->{b}" for n, (a, b) in casts.items() if n not in alive and a and b and a != b)}


def edge_rewritten(ep, skip_dim_order: bool):
    """(the edge program's graph module after both passes, their facts, the rewritten edge program).

    QNN lowers with qnn_edge_config(): _check_ir_validity=False, which also lets the non-core aten.rms_norm the
    pass builds stay legal (written out: importing QNN's utils loads torchao, 20 s)."""
    import torch
    from executorch.exir import EdgeCompileConfig, to_edge

    with torch.fx.experimental._config.patch(backed_size_oblivious=True):  # as export_program: a dim keeps its range
        edge_ep = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=skip_dim_order)
                          ).exported_program()
    facts = rewrite(edge_ep.graph_module, quantization_capture=False)
    return edge_ep.module(), facts, edge_ep


def capture_rewritten(ep):
    """(ep.module() after both passes with quantization_capture=True, their facts, the exported program)."""
    graph_module = ep.module()
    return graph_module, rewrite(graph_module, quantization_capture=True), ep


# What every recompose script pastes; each path adds the function that builds its graph.
_PIPELINE = (is_backward, symbolic_shapes, export_program, symbolic_export, dtype_of, rewrite, graph_output, op_name,
             fx.fx_intermediates)


class _Recompose(Path):
    """What the recompose paths share: the rewritten graph (`_rewritten`) run in Python, read node by node.

    The persistent cache keeps what rebuilds the rewritten graph without exporting or lowering again
    (`_save`, `_load`): to_edge is most of these paths' compile time.
    """

    packages = ("torch", "executorch")
    warm_imports = EXECUTORCH_WARM + ("executorch.backends.qualcomm._passes", "executorch.exir.serde.serialize")
    takes_shared_export = True
    artifact_cacheable = True
    has_intermediates = True
    trains = "torch's joint graph through the rewrite, run in Python"
    symbolic = "torch.export Dim: the rewritten graph keeps the symbolic sizes and runs every size in Python"

    def _rewrite(self, ep, shared: bool):
        """(the graph module after both passes, the facts, what `_save` keeps): the path's pipeline call on `ep`,
        `shared` if it is the runner's export of the structure (which other ET paths lower too)."""
        raise NotImplementedError

    def _script_rewrite(self) -> str:
        """The script's expression of `_rewrite` on `ep`."""
        raise NotImplementedError

    def _rewritten(self, spec, module, example, exported=None):
        """(graph module, facts, what `_save` keeps) of `module`, `spec`'s dynamic dims symbolic."""
        quiet_imports()
        ep = export(module, example, exported, spec)
        with stage("compile"), shared_provenance():
            graph_module, facts, built = self._rewrite(ep, shared=exported is not None)
        return graph_module, {**facts, **symbolic_facts(spec, ep)}, built

    def _save(self, built) -> bytes:
        raise NotImplementedError

    def _load(self, data: bytes):
        """The graph module after both passes, from what `_save` kept."""
        raise NotImplementedError

    def script_calls(self) -> str:
        call = self._script_rewrite()
        return f'''\
def run_path(model, example, x):
    """{self.name}: {self.description}"""
    graph_module, facts, _ = {call.replace("(ep", "(export_program(model, example, DYNAMIC)")}
    print("QNN's RemoveRedundancy + RecomposeRmsNorm:", facts)  # rms_norm_input_dtype: what the rebuilt norm reads
    return graph_output(graph_module, example)


def intermediates(model, example, x):
    """The rewritten graph run node by node, every node's value kept (for the stage table)."""
    ep = export_program(model, example, DYNAMIC)
    return fx_intermediates({call}[0], example)
'''

    def prepare(self, spec, module, example, exported=None) -> Prepared:
        graph_module, facts, built = self._rewritten(spec, module, example, exported)
        if spec.grad and exported is not None:
            facts = {**facts, **joint_facts(exported, call_ops(graph_module.graph))}
        return Prepared(module_runner(graph_module, spec), facts, built=built)

    def artifact(self, prepared: Prepared) -> bytes | None:
        return self._save(prepared.built) if prepared.built is not None else None

    def restore(self, spec, data: bytes) -> Prepared:
        return Prepared(module_runner(self._load(data), spec), {}, built=None)

    def intermediates(self, spec, module, example):
        """The rewritten graph rebuilt as `prepare` builds it and run node by node (_fx_intermediates)."""
        return fx.fx_runner(self._rewritten(spec, module, example)[0], spec,
                            fx.INTERPRETED.format("the rewritten graph"))


def _zip_bytes(save, program) -> bytes:
    buffer = io.BytesIO()
    save(program, buffer)
    return buffer.getvalue()


class RecomposePath(_Recompose):
    """to_edge, then QNN's edge-graph RemoveRedundancy + RecomposeRmsNorm."""

    name = "executorch-recompose"
    control_path = "executorch"
    description = ("torch.export -> to_edge -> QNN RemoveRedundancy + RecomposeRmsNorm -> "
                   "the edge graph run in Python")
    pipeline = _PIPELINE + (edge_rewritten,)
    skip_dim_order = False

    def _rewrite(self, ep, shared: bool):
        return edge_rewritten(decomposed_once(ep) if shared else ep, self.skip_dim_order)

    def _script_rewrite(self) -> str:
        return f"edge_rewritten(ep, {self.skip_dim_order!r})"

    def _save(self, built) -> bytes:
        """The rewritten edge program, by ExecuTorch's serializer (torch.export.save's format, with the edge
        dialect's ops, which torch's own serializer does not know)."""
        from executorch.exir.serde.serialize import save

        return _zip_bytes(save, built)

    def _load(self, data: bytes):
        from executorch.exir.serde.serialize import load

        return load(io.BytesIO(data)).module()


class RecomposeNoDimOrderPath(RecomposePath):
    """As RecomposePath with EdgeCompileConfig(_skip_dim_order=True): casts stay _to_copy."""

    name = "executorch-recompose-no-dim-order"
    description = ("torch.export -> to_edge(_skip_dim_order=True) -> QNN RemoveRedundancy + RecomposeRmsNorm -> "
                   "the edge graph run in Python")
    skip_dim_order = True


class RecomposeCapturePath(_Recompose):
    """QNN's quantization capture: both passes (quantization_capture=True) on ep.module()."""

    name = "executorch-recompose-capture"
    control_path = "executorch"
    description = ("torch.export -> ep.module() -> QNN RemoveRedundancy + RecomposeRmsNorm "
                   "(quantization_capture=True) -> the graph run in Python")
    pipeline = _PIPELINE + (capture_rewritten,)

    def _rewrite(self, ep, shared: bool):
        return capture_rewritten(ep)

    def _script_rewrite(self) -> str:
        return "capture_rewritten(ep)"

    def _save(self, built) -> bytes:
        """The exported program the passes rewrite (torch.export.save): ep.module() and the two passes take
        milliseconds, the export does not, and a rewritten graph module cannot be serialised."""
        import torch

        return _zip_bytes(torch.export.save, built)

    def _load(self, data: bytes):
        import torch

        graph_module = torch.export.load(io.BytesIO(data)).module()
        rewrite(graph_module, quantization_capture=True)
        return graph_module
