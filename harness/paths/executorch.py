"""`executorch`: torch.export -> to_edge -> to_executorch -> executorch.runtime.

The .pte runs on the portable/optimized CPU kernels linked into ExecuTorch's
pybindings; there is no delegate. An op without an out variant in the
runtime's kernel library fails at to_executorch ("Missing out variants"), in
the compile stage.
"""
from __future__ import annotations

from harness.paths._executorch_common import (
    EXECUTORCH_WARM,
    call_ops,
    decomposed_once,
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


def edge_program(ep):
    """to_edge of an ExportedProgram: the edge manager the portable kernels' program is made from (re-traced
    size-oblivious, as export_program exports: a symbolic dim keeps its range)."""
    import torch
    from executorch.exir import to_edge

    with torch.fx.experimental._config.patch(backed_size_oblivious=True):
        return to_edge(ep)


class ExecutorchPath(PteArtifact, Path):
    name = "executorch"
    description = "torch.export -> to_edge -> to_executorch -> executorch.runtime (portable/optimized kernels)"
    packages = ("torch", "executorch")
    warm_imports = EXECUTORCH_WARM
    pipeline = (is_backward, symbolic_shapes, export_program, symbolic_export, edge_program, op_name, call_ops,
                pte_program, load_forward, forward_output)
    takes_shared_export = True
    artifact_cacheable = True
    trains = "torch's joint graph -> to_edge -> to_executorch -> the portable runtime"
    symbolic = ("torch.export Dim through to_edge and to_executorch: the .pte's memory plan takes the upper bound, "
                "the runtime resizes the inputs")

    def script_calls(self) -> str:
        return f'''\
def run_path(model, example, x):
    """{self.name}: {self.description}"""
    edge = edge_program(export_program(model, example, DYNAMIC))
    print("edge ops:", ", ".join(call_ops(edge.exported_program().graph)))
    program, method = load_forward(pte_program(edge).buffer)
    return forward_output(method, example)
'''

    def prepare(self, spec, module, example, exported=None) -> Prepared:
        quiet_imports()
        ep = export(module, example, exported, spec)
        with stage("compile"), shared_provenance():
            edge = edge_program(decomposed_once(ep) if exported is not None else ep)
            ops = call_ops(edge.exported_program().graph)
            program = pte_program(edge)
            buffer = bytes(program.buffer)
        facts = {"edge_ops": ops, **(joint_facts(ep, ops) if spec.grad else {}), **pte_facts(spec, ep, program)}
        return Prepared(pte_runner(buffer, spec), facts, built=buffer)
