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
    op_name,
    PteArtifact,
    pte_bytes,
    pte_runner,
    quiet_imports,
)
from harness.paths.base import Path, Prepared, stage

_PLUMBING = {"getitem", "executorch_call_delegate"}


def delegation_facts(edge) -> dict:
    """Which ops of the lowered edge program went to a delegate, which did not."""
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    gm = edge.exported_program().graph_module
    delegated: set[str] = set()
    undelegated: set[str] = set()
    calls = 0
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = op_name(node.target)
        if name == "executorch_call_delegate":
            calls += 1
            lowered = getattr(gm, node.args[0].target)
            if isinstance(lowered, LoweredBackendModule):
                for inner in lowered.original_module.graph.nodes:
                    if inner.op == "call_function":
                        delegated.add(op_name(inner.target))
        elif name not in _PLUMBING:
            undelegated.add(name)
    delegated -= _PLUMBING
    return {
        "delegated": calls > 0,
        "fully_delegated": calls > 0 and not undelegated,
        "delegated_ops": sorted(delegated),
        "undelegated_ops": sorted(undelegated),
    }


def warm_up() -> None:
    """What XNNPACK's first lowering in a process pays, paid once by the warm process workers fork from: its
    passes match the graphs of reference modules (bilinear upsampling, SDPA) that they export and lower on
    first use (measured: 37 s at load 15, kept by functools caches, so forked workers start with them)."""
    from executorch.backends.xnnpack.partition.graphs import bilinear_2d, sdpa

    bilinear_2d.get_graphs_dict()
    sdpa.get_graphs()


class XnnpackPath(PteArtifact, Path):
    name = "executorch-xnnpack"
    control_path = "executorch"
    description = "torch.export -> to_edge_transform_and_lower(XnnpackPartitioner) -> executorch.runtime"
    packages = ("torch", "executorch")
    warm_imports = EXECUTORCH_WARM + ("harness.paths.executorch_xnnpack:warm_up",)
    script_imports = ("from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner\n"
                      "from executorch.exir import to_edge_transform_and_lower\n"
                      "from executorch.runtime import Runtime\n")

    def script_code(self) -> str:
        return f'''\
def run_path(model, example, x):
    """{self.name}: {self.description}"""
    with torch.no_grad():
        ep = torch.export.export(model, example)
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    program = edge.to_executorch()
    loaded = Runtime.get().load_program(program.buffer)
    method = loaded.load_method("forward")
    return to_numpy(single(method.execute(example)))
'''

    def prepare(self, spec, module, example, exported=None) -> Prepared:
        quiet_imports()
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner,
        )
        from executorch.exir import to_edge_transform_and_lower

        ep = export(module, example, exported)
        with stage("compile"):
            edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
            facts = delegation_facts(edge)
        buffer = pte_bytes(edge)
        return Prepared(pte_runner(buffer, spec), facts, built=buffer)
