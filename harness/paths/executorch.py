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
    export,
    PteArtifact,
    pte_bytes,
    pte_runner,
    quiet_imports,
)
from harness.paths.base import Path, Prepared, stage


class ExecutorchPath(PteArtifact, Path):
    name = "executorch"
    description = "torch.export -> to_edge -> to_executorch -> executorch.runtime (portable/optimized kernels)"
    packages = ("torch", "executorch")
    warm_imports = EXECUTORCH_WARM
    script_imports = "from executorch.exir import to_edge\nfrom executorch.runtime import Runtime\n"

    def script_code(self) -> str:
        return f'''\
def run_path(model, example, x):
    """{self.name}: {self.description}"""
    with torch.no_grad():
        ep = torch.export.export(model, example)
    program = to_edge(ep).to_executorch()
    loaded = Runtime.get().load_program(program.buffer)
    method = loaded.load_method("forward")
    return to_numpy(single(method.execute(example)))
'''

    def prepare(self, spec, module, example, exported=None) -> Prepared:
        quiet_imports()
        from executorch.exir import to_edge

        ep = export(module, example, exported)
        with stage("compile"):
            edge = to_edge(ep)
            ops = call_ops(edge.exported_program().graph)
        buffer = pte_bytes(edge)
        return Prepared(pte_runner(buffer, spec), {"edge_ops": ops}, built=buffer)
