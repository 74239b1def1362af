"""torch.export once per structure, for every path that starts from an ExportedProgram (a gradient case's: of
torch's joint forward-backward graph)."""
from __future__ import annotations

from collections import OrderedDict

from harness.paths.base import StageError, dynamic_of, example_args, export_program, stage
from harness.spec import CaseSpec


EXPORT_MEMO_SIZE = 4  # structures whose exported program a worker keeps for the paths still to come


class ExportMemo:
    """torch.export once per structure for every path that takes an exported program.

    The consumers (TVM's importer, to_edge, to_edge_transform_and_lower,
    ep.module(), torch.onnx.export) were checked to leave the program
    unchanged (graph code, signature, state dict, constants), and an export under no_grad gives the
    same graph as one with grad enabled on the nightly's structures, so the
    paths see exactly what their own export gives them. It outlives a worker's
    artifacts (groups of one structure's paths follow each other), holding
    the last EXPORT_MEMO_SIZE structures.
    """

    def __init__(self, size: int = EXPORT_MEMO_SIZE):
        self.size = size
        self._programs: OrderedDict[str, object] = OrderedDict()
        self.hits = 0

    def seed(self, spec: CaseSpec, program) -> None:
        """Keep an export made elsewhere for `spec`'s structure (a module case's, made to lift it); a symbolic
        case's is not kept (the lift exports at the case's sizes: the paths get the symbolic export)."""
        if spec.dynamic:
            return
        key = spec.structure_key()
        if key not in self._programs:
            self._programs[key] = program
            while len(self._programs) > self.size:
                self._programs.popitem(last=False)

    def get(self, spec: CaseSpec, module, example):
        """The ExportedProgram of `spec`'s structure, or the StageError its export raised; a `"dynamic"` case's
        dims symbolic (export_program), so the one program serves every size of the structure."""
        key = spec.structure_key()
        if key in self._programs:
            self._programs.move_to_end(key)
            self.hits += 1
            return self._programs[key]
        try:
            with stage("export"):
                program = export_program(_exportable(module, example), example_args(example), dynamic_of(spec))
        except StageError as exc:
            program = exc
        self._programs[key] = program
        while len(self._programs) > self.size:
            self._programs.popitem(last=False)
        return program



def _exportable(module, example):
    """What torch.export takes for `module`: itself, or for a gradient case's Backward torch's joint
    forward-backward graph of it (torch.export cannot trace autograd.grad: harness.oracle.backward.joint_graph)."""
    from harness.oracle.backward import Backward, joint_graph

    if isinstance(module, Backward):
        return joint_graph(module, example_args(example))
    return module
