"""The pieces a gradient case's repro scripts add (docs/gradients.md): the cotangents and the FP64 reference.

A `"grad": true` case's scripts (the full one, harness.repro.script; the
short one, harness.repro.short_script) build the norm as a forward case's do,
wrap it in normdiff's Backward (script.backward_code), draw the cotangents as
harness.oracle.inputs.draw_cotangents does (stream COTANGENT, keyed by the
output's position; a SHA-256 checks their bytes), and hold each gradient
(d_x, d_weight, d_bias, …) to normdiff's check (harness.repro.check_code,
judged alone: no eager share) against the reference: the backward normdiff
lifted from torch's joint graph (harness.modules.lift_backward), pasted as a
function and run in float64 torch with every rounding it writes mapped to
float64 (its exact mathematics), on the inputs, the cotangents and the
module's own parameters.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap

import numpy as np

from harness.oracle import inputs as draws
from harness.oracle.inputs import COTANGENT
from harness.repro import program_script as P
from harness.spec import CaseSpec

_SETUPS: dict = {}  # spec -> its engine Setup: the full and the short script of one case lift once


def setup(spec: CaseSpec):
    """The engine's Setup of gradient case `spec` (its inputs with the cotangents, its reference, its lifted
    backward); a harness.engine.cases.CaseProblem where the backward cannot be lifted."""
    from harness.engine.cases import Cases

    if spec not in _SETUPS:
        _SETUPS.clear()
        _SETUPS[spec] = Cases().setup(spec)
    return _SETUPS[spec]


def cotangent_names(spec: CaseSpec) -> tuple[str, ...]:
    """The cotangents' names: `dy` for a forward of one output, else dy0, dy1, … (the lifted program's)."""
    n = len(setup(spec).inputs.cotangents)
    return ("dy",) if n == 1 else tuple(f"dy{k}" for k in range(n))


def cotangent_code(spec: CaseSpec, draw, with_rng: bool = False) -> str:
    """Code drawing each cotangent as normdiff does (`draw(spec, p, stream, name, rounded, shape)` -> its line,
    script.draw_input's signature), checking their bytes, and appending them to INPUTS."""
    from harness.core.dtypes import name_of

    cots = setup(spec).inputs.cotangents
    names = cotangent_names(spec)
    lines = ["# -- the cotangents: one per output of the norm, drawn from their own stream (normdiff's "
             f"{COTANGENT}, keyed by the output's position)"]
    if with_rng:
        lines += [inspect.getsource(draws._rng).strip("\n"), f"rng = lambda stream, name=None: _rng({spec.seed}, stream, name)"]
    h = hashlib.sha256()
    for k, (name, a) in enumerate(zip(names, cots)):
        code = draw(spec, spec.cotangent_dict, (COTANGENT, str(k)), name, a, a.shape)
        lines.append(code if f"\n{name} = " in "\n" + code else
                     code + f"\n{name} = {name}64.reshape({a.shape!r}).astype({P.NUMPY_TYPES[name_of(a.dtype)]})")
        h.update(np.ascontiguousarray(a).tobytes())
    lines += [f'assert hashlib.sha256(b"".join(a.tobytes() for a in ({", ".join(names)},))).hexdigest() == (',
              f'    "{h.hexdigest()}"), "the cotangents differ from normdiff\'s"',
              f"INPUTS = INPUTS + ({', '.join(names)},)  # the Backward's inputs: the norm's, then the cotangents"]
    return "\n".join(lines) + "\n"


def _free_names(source: str) -> list[str]:
    """The names the lifted program reads without assigning them, in first-use order."""
    body = P._body(source)
    assigned, free = set(), []
    for stmt in body.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in assigned \
                    and node.id not in free and node.id not in ("torch", "eps"):
                free.append(node.id)
        if isinstance(stmt, ast.Assign):
            assigned.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    return free


def reference_code(spec: CaseSpec) -> str:
    """Code defining `ref` (the tuple of the gradients' FP64 references): the lifted backward as a function,
    every rounding mapped to float64, on float64 copies of the inputs, the cotangents and the parameters
    (read off the model, by their last name part, as normdiff's lift reads them)."""
    source = setup(spec).lift.program
    inputs = ["x", *sorted(spec.inputs_dict), *cotangent_names(spec)]  # INPUTS' order
    params = [n for n in _free_names(source) if n not in inputs]
    args = ", ".join([*inputs, *params])
    body = textwrap.indent(P.float64_source(source), "    ")
    return "\n".join([
        "# -- the FP64 reference: the backward normdiff lifted from torch's joint graph (harness/modules/lift_backward.py),",
        "#    every rounding it writes mapped to float64 (its exact mathematics)",
        f"def backward64({args}, eps={float(spec.eps)!r}):", body, "",
        "PARAMETERS = {n.rsplit('.', 1)[-1]: p for n, p in model.forward_module.named_parameters()}",
        "with torch.no_grad():",
        "    ref = to_numpy(backward64(*(to_torch(a.astype(np.float64)) for a in INPUTS),",
        f"                              *(PARAMETERS[n].detach().double() for n in {tuple(params)!r})))",
    ]) + "\n"
