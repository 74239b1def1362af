"""Lift a module's torch.export graph into a norm program (docs/contracts.md §7, §8).

One statement per computing node, in graph order, named after the node
(`to`, `pow_1`, `mean`, …), built as the IR of the op table's ops
(harness/program/ops.py: each op lists the ATen ops that compute it);
layout-free nodes (asserts, clones, detach) are dropped, and what the
language cannot hold (an op it has no entry for, a tensor constant, a buffer
the forward writes) is an Unliftable naming the op and the
class. The Program is then checked against its case like any program, so a
lifted program is a program: it gives the FP64 reference and the bound. Its
text (harness.program.render) is only shown: `normdiff lift` prints it as a
ready §7 spec, and it parses back to the very same Program.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.modules.handlers import HANDLERS, SKIP
from harness.modules.lift_ops import Lifter, Val
from harness.modules.load import Unliftable
from harness.modules.names import unique
from harness.program.grammar import MAX_OUTPUTS
from harness.program.ir import Outputs, Program, Return
from harness.program.render import program_from_ir


@dataclass(frozen=True)
class Lifted:
    """A lifted program and how its names map onto the module's."""
    program: Program                                # built as IR; its source is its rendering
    pattern: str                                    # the norm family the program shows, or "program"
    inputs: tuple[tuple[str, str], ...]             # (program name, forward name), x first
    params: tuple[tuple[str, str], ...]             # (program name, state name) of what it reads
    ops: tuple[str, ...]                            # the ATen ops of the graph, in order (for the record)

    @property
    def source(self) -> str:
        return self.program.source


def _user_output(ep, owner):
    from torch.export.graph_signature import OutputKind

    kinds = [s.kind for s in ep.graph_signature.output_specs]
    mutated = [s.target for s in ep.graph_signature.output_specs if s.kind != OutputKind.USER_OUTPUT]
    if mutated:
        raise Unliftable(f"class {owner}: its forward writes {', '.join(map(str, mutated))} (state the language "
                         "cannot hold)")
    count = kinds.count(OutputKind.USER_OUTPUT)
    if not 1 <= count <= MAX_OUTPUTS:
        raise Unliftable(f"class {owner}: its forward returns {count} values; a program returns 1 to "
                         f"{MAX_OUTPUTS} tensors")
    out = next(n for n in ep.graph.nodes if n.op == "output").args[0]
    out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return out  # one node per output (a tuple or list the forward returns: each of its tensors, in order)


def input_names(called: tuple[str, ...], state: dict[str, str]) -> dict[str, str]:
    """{forward name: program name} of the inputs called (the first is x), distinct from the parameters'."""
    taken = set(state.values()) | {"x"}
    return {called[0]: "x", **unique(called[1:], taken)}


def lift(ep, owner: str, called: tuple[str, ...], state_names: dict[str, str]) -> Lifted:
    """The program of ExportedProgram `ep` of class `owner`, exported with the forward's arguments `called`
    (their names, in call order; the first is x); `state_names` {state name: program name}."""
    import torch
    from torch.export.graph_signature import InputKind

    sig = ep.graph_signature
    user = [s.arg.name for s in sig.input_specs if s.kind == InputKind.USER_INPUT]
    if len(user) != len(called):
        raise Unliftable(f"class {owner}: its graph takes {len(user)} inputs for the {len(called)} given")
    names = input_names(called, state_names)
    inputs = {ph: names[fname] for ph, fname in zip(user, called)}
    lifter = Lifter(owner, ep)
    placeholders = {}
    used = {n.name for n in ep.graph.nodes if n.op == "placeholder" and n.users}
    for s in sig.input_specs:
        name = s.arg.name
        if s.kind != InputKind.USER_INPUT and name not in used:
            continue  # a buffer the forward does not read (a BatchNorm's num_batches_tracked in eval)
        if s.kind == InputKind.USER_INPUT:
            placeholders[name] = Val(inputs[name], _meta(ep, name))
        elif s.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            if s.target not in state_names:
                raise Unliftable(f"class {owner}: its forward reads {s.target}, which is not floating point "
                                 "(the language holds float tensors)")
            placeholders[name] = Val(state_names[s.target], _meta(ep, name))
            lifter.params.append((state_names[s.target], s.target))
        elif s.kind == InputKind.CONSTANT_TENSOR:
            value = ep.constants[s.target]
            if not isinstance(value, torch.Tensor) or value.numel() != 1 or value.dim() != 0:
                shape = list(getattr(value, "shape", []))
                raise Unliftable(f"class {owner}: a tensor constant of shape {shape} in its forward is outside "
                                 "the program language (a number is inside)")
            placeholders[name] = value.item()
        else:
            raise Unliftable(f"class {owner}: an input of kind {s.kind.name} is outside the program language")
    lifter.env.update(placeholders)
    lifter.taken |= set(inputs.values()) | set(state_names.values())
    output = _user_output(ep, owner)
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        name = lifter.op_name(node)
        packet = name.split(".")[1] if name.startswith("aten.") else name
        if packet in SKIP:
            lifter.env[node.name] = None
            continue
        handler = HANDLERS.get(packet)
        if handler is None:
            raise Unliftable(f"class {owner}: op {name} is outside the program language")
        lifter.ops.append(name)
        handler(lifter, node)
    results = [lifter.value(node) for node in output]
    if not all(isinstance(r, Val) for r in results):
        raise Unliftable(f"class {owner}: its forward returns a number, not a tensor")
    returned = results[0].expr if len(results) == 1 else Outputs(tuple(r.expr for r in results))
    statements = (*lifter.statements, Return(returned, len(lifter.statements) + 1))
    program = program_from_ir(statements, tuple(names[f] for f in called), tuple(state_names.values()))
    params = tuple(sorted(set(lifter.params)))
    return Lifted(program, lifter.pattern(), tuple((names[f], f) for f in called), params, tuple(lifter.ops))


def _meta(ep, placeholder: str):
    node = next(n for n in ep.graph.nodes if n.op == "placeholder" and n.name == placeholder)
    return node.meta.get("val")
