"""`executorch-xnnpack`: to_edge_transform_and_lower with XnnpackPartitioner.

What XNNPACK does not take stays in the graph and runs on ExecuTorch's
portable kernels; the record's facts say which ops went where:

    {"delegated": bool,            # at least one XNNPACK delegate call
     "fully_delegated": bool,      # no compute op left outside a delegate
     "delegated_ops": [...],       # ops inside the delegates (edge names)
     "undelegated_ops": [...]}     # ops left to the portable kernels

(XNNPACK has no bfloat16 kernels for most ops; the partitioner then leaves
them to the portable kernels rather than refusing, so bfloat16 cases run
partly or wholly undelegated instead of being unsupported.)
"""
from __future__ import annotations

from harness.paths._executorch_common import (
    EXECUTORCH_WARM,
    export,
    forward_output,
    load_forward,
    op_name,
    PteArtifact,
    pte_facts,
    pte_program,
    pte_runner,
    quiet_imports,
)
from harness.paths._backward import joint_facts
from harness.paths._frontend_memo import shared_provenance
from harness.paths.base import Path, Prepared, export_program, is_backward, stage, symbolic_export, symbolic_shapes


def xnnpack_lowered(ep):
    """to_edge_transform_and_lower with XnnpackPartitioner: what XNNPACK takes is delegated, the rest stays."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    import torch
    from executorch.exir import to_edge_transform_and_lower

    with torch.fx.experimental._config.patch(backed_size_oblivious=True):  # as export_program: a dim keeps its range
        return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])


def delegation_facts(edge) -> dict:
    """Which ops of the lowered edge program went to a delegate, which did not."""
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    plumbing = {"getitem", "executorch_call_delegate"}
    gm = edge.exported_program().graph_module
    calls = [node for node in gm.graph.nodes if node.op == "call_function"]
    delegates = [getattr(gm, n.args[0].target) for n in calls if op_name(n.target) == "executorch_call_delegate"]
    delegated = {op_name(inner.target) for lowered in delegates if isinstance(lowered, LoweredBackendModule)
                 for inner in lowered.original_module.graph.nodes if inner.op == "call_function"} - plumbing
    undelegated = {op_name(node.target) for node in calls} - plumbing
    return {"delegated": bool(delegates), "fully_delegated": bool(delegates) and not undelegated,
            "delegated_ops": sorted(delegated), "undelegated_ops": sorted(undelegated)}


def warm_up() -> None:
    """What XNNPACK's first lowering in a process pays, paid once by the warm process workers fork from: its
    passes match the graphs of reference modules (bilinear upsampling, SDPA) that they export and lower on
    first use (kept by functools caches, so forked workers start with them)."""
    from executorch.backends.xnnpack.partition.graphs import bilinear_2d, sdpa

    bilinear_2d.get_graphs_dict()
    sdpa.get_graphs()


class XnnpackPath(PteArtifact, Path):
    name = "executorch-xnnpack"
    control_path = "executorch"
    description = "torch.export -> to_edge_transform_and_lower(XnnpackPartitioner) -> executorch.runtime"
    packages = ("torch", "executorch")
    warm_imports = EXECUTORCH_WARM + ("harness.paths.executorch_xnnpack:warm_up",)
    pipeline = (is_backward, symbolic_shapes, export_program, symbolic_export, xnnpack_lowered, op_name,
                delegation_facts, pte_program, load_forward, forward_output)
    takes_shared_export = True
    artifact_cacheable = True
    trains = "torch's joint graph, partitioned for XNNPACK where it takes it"
    symbolic = ("torch.export Dim through to_edge_transform_and_lower (XNNPACK's delegates take the upper bound) "
                "and to_executorch")

    def script_calls(self) -> str:
        return f'''\
def run_path(model, example, x):
    """{self.name}: {self.description}"""
    edge = xnnpack_lowered(export_program(model, example, DYNAMIC))
    print("XNNPACK delegation:", delegation_facts(edge))
    program, method = load_forward(pte_program(edge).buffer)
    return forward_output(method, example)
'''

    def prepare(self, spec, module, example, exported=None) -> Prepared:
        quiet_imports()
        ep = export(module, example, exported, spec)
        with stage("compile"), shared_provenance():
            edge = xnnpack_lowered(ep)
            facts = delegation_facts(edge)
            if spec.grad:
                facts.update(joint_facts(ep, facts["delegated_ops"] + facts["undelegated_ops"]))
            program = pte_program(edge)
            buffer = bytes(program.buffer)
        return Prepared(pte_runner(buffer, spec), {**facts, **pte_facts(spec, ep, program)}, built=buffer)
