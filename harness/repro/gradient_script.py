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

import hashlib
import textwrap

import numpy as np

from harness.oracle.inputs import COTANGENT
from harness.repro import program_script as P
from harness.spec import CaseSpec

_SETUPS: dict = {}  # spec -> (its engine Setup, its LiftedBackward): the full and the short script lift once


def _made(spec: CaseSpec):
    from harness.engine.cases import Cases

    if spec not in _SETUPS:
        _SETUPS.clear()
        cases = Cases()
        _SETUPS[spec] = (cases.setup(spec), cases.lifted_backward(spec))
    return _SETUPS[spec]


def setup(spec: CaseSpec):
    """The engine's Setup of gradient case `spec` (its inputs with the cotangents, its reference, its lifted
    backward's check); a harness.engine.cases.CaseProblem where the backward cannot be lifted."""
    return _made(spec)[0]


def cotangent_names(spec: CaseSpec) -> tuple[str, ...]:
    """The cotangents' names: `dy` for a forward of one output, else dy0, dy1, … (the lifted program's)."""
    n = len(setup(spec).inputs.cotangents)
    return ("dy",) if n == 1 else tuple(f"dy{k}" for k in range(n))


def cotangent_code(spec: CaseSpec, draw, rng: str = "") -> str:
    """Code drawing each cotangent as normdiff does (`draw(spec, p, stream, name, rounded, shape)` -> its line,
    script.draw_input's signature), checking their bytes, and appending them to INPUTS; `rng` is the code
    defining the streams where the script has none yet."""
    from harness.core.dtypes import name_of

    cots = setup(spec).inputs.cotangents
    names = cotangent_names(spec)
    lines = ["# -- the cotangents: one per output of the norm, drawn from their own stream (normdiff's "
             f"{COTANGENT}, keyed by the output's position)"]
    if rng:
        lines.append(rng)
    h = hashlib.sha256()
    for k, (name, a) in enumerate(zip(names, cots)):
        code = draw(spec, spec.cotangent_dict, (COTANGENT, str(k)), name, a, a.shape)
        lines.append(code if f"\n{name} = " in "\n" + code else
                     code + f"\n{name} = {name}64.reshape({a.shape!r}).astype({P.NUMPY_TYPES[name_of(a.dtype)]})")
        h.update(np.ascontiguousarray(a).tobytes())
    lines += [f'assert hashlib.sha256(b"".join(a.tobytes() for a in ({", ".join(names)},))).hexdigest() == '
              f'"{h.hexdigest()}", "the cotangents differ from normdiff\'s"',
              f"INPUTS = INPUTS + ({', '.join(names)},)  # the Backward's inputs: the norm's, then the cotangents"]
    return "\n".join(lines) + "\n"


def reference_code(spec: CaseSpec) -> str:
    """Code defining `ref` (the tuple of the gradients' FP64 references): the lifted backward as a function,
    every rounding mapped to float64, on float64 copies of the inputs, the cotangents and the parameters
    (read off the model, by their last name part, as normdiff's lift reads them)."""
    lifted = _made(spec)[1]
    names = [*lifted.inputs, *lifted.params.values()]
    body = textwrap.indent(P.float64_source(lifted.source), "    ")
    return "\n".join([
        "# -- the FP64 reference: the backward normdiff lifted from torch's joint graph (harness/modules/lift_backward.py),",
        "#    every rounding it writes mapped to float64 (its exact mathematics)",
        f"def backward64({', '.join(names)}, eps={float(spec.eps)!r}):", body, "",
        "STATE = {**dict(model.forward_module.named_parameters()), **dict(model.forward_module.named_buffers())}",
        "with torch.no_grad():",
        "    ref = to_numpy(backward64(*(to_torch(a.astype(np.float64)) for a in INPUTS),",
        f"                              *(STATE[n].detach().double() for n in {tuple(lifted.params)!r})))",
    ]) + "\n"
