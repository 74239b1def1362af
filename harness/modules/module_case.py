"""One module case resolved in a worker: the module built, its parameters set, exported and lifted.

`resolve(spec)` gives a ModuleCase: the plain-data `Resolved` (the lifted
program's text and how its names map onto the module's: what crosses a process
boundary and what `normdiff lift` prints), the lifted Program itself (built as
IR by the lifter, or parsed once from a kept Resolved), and what the executor
needs in this process: a fresh module for each path (built again,
deterministic), the example tensors in the forward's order, the parameter
values as the reference reads them, and the lift check of one input.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from harness.modules import lift_check, load, state
from harness.modules.lift import input_names, lift
from harness.program import Program, ProgramCase, ProgramError, check, parse


@dataclass(frozen=True)
class Resolved:
    """A module case's lifted program, as plain data."""
    cls: str
    source: str
    pattern: str                         # the family the lifted program shows, or "program"
    called: tuple[str, ...]              # the forward's arguments given, in call order (the first is x)
    keywords: tuple[str, ...]            # those of them passed by keyword (a forward parameter skipped before)
    inputs: tuple[tuple[str, str], ...]  # (program name, forward name)
    params: tuple[tuple[str, str, tuple[int, ...]], ...]  # (program name, state name, shape) the program reads
    ops: tuple[str, ...]                 # the graph's ATen ops, in order

    def program_case(self, spec) -> ProgramCase:
        types = {}
        for prog, fwd in self.inputs[1:]:
            obj = spec.inputs_dict.get(fwd, {})
            types[prog] = (tuple(obj.get("shape", spec.shape)), obj.get("dtype", spec.dtype))
        return ProgramCase(spec.dtype, tuple(spec.shape), spec.weight_dtype, tuple(p for p, _ in self.inputs[1:]),
                           {p: tuple(shape) for p, _, shape in self.params}, 0.0, types)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Resolved":
        return cls(d["cls"], d["source"], d["pattern"], tuple(d["called"]), tuple(d["keywords"]),
                   tuple(tuple(p) for p in d["inputs"]), tuple((p, s, tuple(sh)) for p, s, sh in d["params"]),
                   tuple(d["ops"]))


def _call_order(spec, forward: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the forward's arguments given, in its order; those passed by keyword): positional up to the first
    parameter the spec leaves out, by keyword after it."""
    given = {n for n, _ in spec.inputs}
    called, keywords, gap = [forward[0]], [], False
    for name in forward[1:]:
        if name not in given:
            gap = True
            continue
        called.append(name)
        if gap:
            keywords.append(name)
    return tuple(called), tuple(keywords)


class _Keywords:
    """module(x, *rest) -> inner(x, *positional, **keywords): a forward parameter left out before one given."""

    def __new__(cls, inner, n_positional: int, keywords: tuple[str, ...]):
        import torch

        class Call(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = inner

            def forward(self, *args):
                return self.inner(*args[:n_positional], **dict(zip(keywords, args[n_positional:])))

        return Call().eval()


class ModuleCase:
    """A resolved module case in this worker."""

    def __init__(self, spec, resolved: Resolved, module, names: dict[str, str], program: Program | None = None):
        """`program`: the lifted Program as the lifter built it; None parses `resolved.source` (a kept lift).
        Either way it is checked against the case here (a ProgramError when it does not check)."""
        self.spec = spec
        self.resolved = resolved
        self.module = module
        self.names = names  # state name -> program name
        self.case = resolved.program_case(spec)
        if program is None:
            self.program = parse(resolved.source, case=self.case)
        else:
            check(program, self.case)
            self.program = program
        self._params = None
        self.digest = self._digest()
        self.exported = None  # the ExportedProgram `resolve` lifted (None: restored from a kept lift)

    def at(self, spec) -> "ModuleCase":
        """This case at another size of its symbolic dims (`spec` of the same structure): the same module and
        lifted program, checked at `spec`'s shape. A program holding a literal size of a symbolic dim (a view
        to the first size's shape) does not check there: the class is then exported and lifted at this size."""
        try:
            return ModuleCase(spec, self.resolved, self.module, self.names, self.program)
        except ProgramError:
            return resolve(spec)

    def _digest(self) -> str:
        """What a compiled artifact of this module depends on beyond its spec: the graph it computes (the
        lifted program) and every floating value it holds (a constructor's init the user edits)."""
        import hashlib

        h = hashlib.sha256(self.resolved.source.encode())
        for name, tensor in state.floating_state(self.module).items():
            h.update(name.encode())
            h.update(np.ascontiguousarray(state.to_numpy(tensor)).tobytes())
        return h.hexdigest()

    def build(self):
        """A fresh module for one path: built again (deterministically) with this case's parameters."""
        module = load.build(self.spec)
        state.redraw(module, self.spec, self.names)
        return self.callable(module)

    def callable(self, module):
        r = self.resolved
        if not r.keywords:
            return module
        return _Keywords(module, len(r.called) - len(r.keywords), r.keywords)

    def param_arrays(self) -> dict[str, np.ndarray]:
        """{program name: value} of the parameters the program reads (read once: this module is never run)."""
        if self._params is None:
            read = {state_name: prog for prog, state_name, _ in self.resolved.params}
            self._params = state.arrays(self.module, read)
        return self._params

    def constant_values(self) -> dict[str, float | None]:
        """{program name: its value where every element holds it, else None} of the parameters read."""
        return {name: (float(a.reshape(-1)[0].astype(np.float64)) if a.size and state.is_constant(a) else None)
                for name, a in self.param_arrays().items()}

    def inputs(self, base):
        """The case's Inputs (harness.oracle.inputs.make_inputs) with the module's parameters, in call order."""
        import dataclasses

        return dataclasses.replace(base, params=self.param_arrays(), order=self.resolved.called[1:])

    def example(self, inputs, layout: str) -> tuple:
        """The example tensors, in call order."""
        from harness.core.tensors import to_torch

        return tuple(to_torch(a, layout) for a in self.call_arrays(inputs))

    def call_arrays(self, inputs) -> tuple:
        return (inputs.x, *(inputs.extra[name] for name in self.resolved.called[1:]))

    def reference_arrays(self, inputs) -> dict[str, np.ndarray]:
        """The arrays the lifted program reads, by its names."""
        by_forward = dict((fwd, prog) for prog, fwd in self.resolved.inputs)
        return {"x": inputs.x, **{by_forward[k]: v for k, v in inputs.extra.items() if k in by_forward},
                **inputs.params}

    def lift_check(self, inputs, evaluation) -> dict:
        """{"lift_check": rel or None, "lift_check_over_bound": share or None, "lift_note": why, or None}."""
        import torch

        from harness.core.tensors import to_torch

        tensors = [to_torch(a) for a in self.call_arrays(inputs)]
        with torch.no_grad():
            out, why = lift_check.module_float64(self.module, tensors, self.resolved.keywords)
        if out is None:
            return {"lift_check": None, "lift_check_over_bound": None, "lift_note": f"not checked: {why}"}
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(evaluation.each):
            return {"lift_check": float("inf"), "lift_check_over_bound": float("inf"),
                    "lift_note": f"the module returns {len(outs)} outputs in float64, its program {len(evaluation.each)}"}
        # each output against its own: the record keeps the worst (a wrong lift of any output is a wrong lift)
        checks = [lift_check.compare(np.asarray(e.out, dtype=np.float64), e.bound, o)
                  for e, o in zip(evaluation.each, outs)]
        return {"lift_check": max(c[0] for c in checks), "lift_check_over_bound": max(c[1] for c in checks),
                "lift_note": None}


@dataclass
class BuiltModule:
    """A module case's class built, its parameters redrawn, before any export: what lifting starts from."""
    module: object
    called: tuple[str, ...]
    keywords: tuple[str, ...]
    names: dict  # state name -> program name


def build_case(spec) -> BuiltModule:
    """Import and build `spec`'s class, redraw its parameters (ModuleSpecError for a bad spec)."""
    module = load.build(spec)
    forward = load.forward_names(module, spec)
    called, keywords = _call_order(spec, forward)
    inputs_taken = set(input_names(called, {}).values())
    names = state.state_names(module, inputs_taken)
    state.redraw(module, spec, names)
    return BuiltModule(module, called, keywords, names)


def resolve(spec, built: BuiltModule | None = None) -> ModuleCase:
    """Import, build, redraw, export and lift `spec`'s class (ModuleSpecError, Unliftable, or a StageError
    of the export)."""
    import torch

    from harness.core.tensors import to_torch
    from harness.oracle.inputs import make_inputs
    from harness.paths.base import stage

    built = built if built is not None else build_case(spec)
    module, called, keywords, names = built.module, built.called, built.keywords, built.names
    inputs = make_inputs(spec)
    example = tuple(to_torch(a, spec.layout) for a in (inputs.x, *(inputs.extra[n] for n in called[1:])))
    callee = module if not keywords else _Keywords(module, len(called) - len(keywords), keywords)
    with stage("export"), torch.no_grad():
        ep = torch.export.export(callee, example)
    prefix = "inner." if keywords else ""
    lifted = lift(ep, spec.cls, called, {prefix + k: v for k, v in names.items()})
    resolved = Resolved(spec.cls, lifted.source, lifted.pattern, called, keywords, lifted.inputs,
                        _read_params(lifted, module, names), lifted.ops)
    case = restore(spec, built, resolved, refusal=lambda: _eager_refusal(callee, example), program=lifted.program)
    case.exported = ep
    return case


def restore(spec, built: BuiltModule, resolved: Resolved, refusal=None, program: Program | None = None) -> ModuleCase:
    """The ModuleCase of a class built and a lifted program made before (by `resolve`, with its `program`
    built as IR, or kept on disk: then parsed from its source); `refusal()` gives torch's own error when the
    module does not run so built (then the check is right)."""
    try:
        return ModuleCase(spec, resolved, built.module, built.names, program)
    except ProgramError as exc:
        refused = refusal() if refusal is not None else None
        if refused:  # torch's own rule: the program's check is right, the class does not run so built
            raise load.Unliftable(f"class {spec.cls}: does not run in eager with a {spec.dtype} input and "
                                  f"{spec.weight_dtype} parameters (the module moved with .to(), as "
                                  f"model.to(dtype) does): torch: {refused}") from None
        raise load.Unliftable(f"class {spec.cls}: the lifted program does not check ({exc})") from None


def _eager_refusal(module, example) -> str | None:
    """torch's one-line error when the module itself refuses the example (export's fake tensors check less:
    CPU layer_norm's mixed-dtype rule), else None."""
    import torch

    try:
        with torch.no_grad():
            module(*example)
    except Exception as exc:  # noqa: BLE001 - the user's forward may raise anything
        return (str(exc).strip() or type(exc).__name__).splitlines()[0][:200]
    return None


def _read_params(lifted, module, names) -> tuple:
    """(program name, state name, shape) of the parameters the lifted program reads."""
    shapes = {n: tuple(t.shape) for n, t in state.floating_state(module).items()}
    by_prog = {v: k for k, v in names.items()}
    return tuple((p, by_prog[p], shapes[by_prog[p]]) for p in lifted.program.params)

