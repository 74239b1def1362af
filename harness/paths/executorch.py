"""`executorch`: torch.export -> to_edge -> to_executorch -> executorch.runtime.

The .pte runs on the portable/optimized CPU kernels linked into ExecuTorch's
pybindings; there is no delegate. An op without an out variant in the
runtime's kernel library fails at to_executorch ("Missing out variants"), in
the compile stage.
"""
from __future__ import annotations

from harness.paths._executorch_common import call_ops, export, pte_runner, quiet_imports
from harness.paths.base import Path, Prepared, stage


class ExecutorchPath(Path):
    name = "executorch"
    packages = ("torch", "executorch")

    def prepare(self, spec, module, example) -> Prepared:
        quiet_imports()
        from executorch.exir import to_edge

        ep = export(module, example)
        with stage("compile"):
            edge = to_edge(ep)
            ops = call_ops(edge.exported_program().graph)
        run = pte_runner(edge, spec)
        return Prepared(run, {"edge_ops": ops})
