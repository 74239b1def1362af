"""A gradient case (`"grad": true`, docs/gradients.md) made concrete in a worker, for every kind of case.

The forward module is built as the kind builds it (a catalog style, a
program's module, a module case's class); the forward is run once on the
case's inputs for its outputs' shapes and dtypes, and one cotangent per
output is drawn (harness.oracle.inputs.draw_cotangents). The case's module is
then `Backward(forward, n_inputs)`, its example the inputs then the
cotangents, and its reference the FP64 evaluation of the backward lifted
from torch's joint graph (harness.modules.lift_backward): one output per
gradient, named d_x, d_weight, …, each with the program's running bound and
witnesses, and judged without eager (Reference.gradient); the first input's
gradient is d_x whatever the forward calls it, as a program calls it x. The lifted
backward is checked against the float64 autograd of the same module, as a
module case's lift is: an `error` at stage `lift` when they disagree.

Lifting (torch's joint graph traced, exported and decomposed) costs seconds
per structure, in every worker that sets the structure up and on every run,
warm or cold; the lifted backward depends on the structure alone (and on a
module case's code and torch's export), so it is kept in the artifact cache
(kind LIFTED_BACKWARD, as plain data: its program's source parsed again) and a
later worker or run restores it in milliseconds (docs/measurements.md).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import numpy as np

from harness.core.dtypes import DTYPES, narrowest
from harness.core.records import LiftCheck

LIFTED_BACKWARD = "lifted-backward"  # the kind of a kept lifted backward in the artifact cache


@dataclass(frozen=True)
class GradientParts:
    """What the engine's Setup of a gradient case holds."""
    inputs: object        # harness.oracle.inputs.Inputs, with its cotangents
    ref: object           # harness.oracle.reference.Reference, one output per gradient
    build: object         # () -> (Backward(module, n), example: inputs then cotangents, as tensors)
    lift: LiftCheck       # the lifted backward and its check against float64 autograd
    lifted: object = None  # the LiftedBackward itself (harness.modules.lift_backward): attribution's stages


def _tensors(arrays, layout: str, like: tuple[int, ...]):
    from harness.core.tensors import to_torch

    return tuple(to_torch(a, layout if a.shape == like else "contiguous") for a in arrays)


def output_types(module, inputs, layout: str) -> tuple[tuple[tuple[int, ...], str], ...]:
    """(shape, dtype) of each output of the forward on the case's inputs (run once, without autograd)."""
    import torch

    from harness.core.dtypes import name_of

    with torch.no_grad():
        out = module(*_tensors(inputs.forward_arg, layout, inputs.x.shape))
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    return tuple((tuple(o.shape), name_of(o.dtype)) for o in outs)


def gradient_parts(spec, make_forward, inputs, input_names: tuple[str, ...], memo: dict, cache=None,
                   salt: str = "", versions: dict | None = None) -> GradientParts:
    """The gradient case of `spec`: `make_forward()` builds a fresh forward module with the case's parameters,
    `inputs` are the forward's (harness.oracle.inputs.Inputs), `input_names` the forward's names of them (x
    first); `memo` keeps each structure's lifted backward (the program depends on the structure alone), and
    `cache` (an ArtifactCache, or None) keeps it across workers and runs, `salt` naming a module case's code and
    `versions` the libraries a lift depends on (harness.engine.cases.lift_versions)."""
    from harness.modules.lift_backward import cotangent_names, float64_gradients
    from harness.oracle import cotangent_walk
    from harness.oracle.backward import Backward, gradient_names
    from harness.oracle.inputs import draw_cotangents
    from harness.oracle.reference import evaluation_reference
    from harness.oracle.witness_error import program_witnesses
    from harness.program import evaluate

    module = make_forward()
    inputs = dataclasses.replace(inputs, cotangents=draw_cotangents(spec, output_types(module, inputs, spec.layout)))
    n = len(inputs.forward_arg)

    def build():
        return Backward(make_forward(), n), _tensors(inputs.run_arg, spec.layout, inputs.x.shape)

    backward, example = Backward(module, n), _tensors(inputs.run_arg, spec.layout, inputs.x.shape)
    key = spec.structure_key()
    if key not in memo:
        memo[key] = kept_lift(spec, backward, example, input_names, cache, salt, versions or {})
    lifted = memo[key]
    arrays = lifted.arrays(inputs.run_arg, module)
    # the rows' errors in a sum over them add as a random walk of the cotangent's signs (harness.oracle.cotangent_walk)
    symmetric = cotangent_walk.symmetric(spec.cotangent_dict)
    walk = cotangent_walk.walker(cotangent_names(len(inputs.cotangents))) if symmetric else None
    evaluation = evaluate(lifted.program, lifted.case, arrays, walker_class=walk)
    witnesses = program_witnesses(spec.case_id, lifted.program, lifted.case, arrays)
    ref = gradient_reference(evaluation_reference(evaluation, witnesses), gradient_names(("x", *input_names[1:]), module))
    grads, why = float64_gradients(backward, inputs.run_arg)
    lift = LiftCheck(program=lifted.source, lifted_pattern="backward", **_check(evaluation, grads, why))
    return GradientParts(inputs, ref, build, lift, lifted)


# the dtypes narrower than float32 (float16, bfloat16): a gradient in one of them is rounded from float32
NARROW = tuple(d for d in DTYPES if narrowest(d, "float32") != "float32")


def rounded_once(ref) -> bool:
    """Whether the lifted backward computes in float32 and rounds each gradient once: its only stages narrower
    than float32 are casts, one per narrower gradient (the lifter's precision plan, docs/gradients.md). A
    program that rounds an intermediate into float16 or bfloat16 (a program written in float16) is not."""
    narrow = [s for s in ref.stages if s.dtype in NARROW]
    outputs = sum(r.out_dtype in NARROW for r in ref.each)
    return bool(narrow) and all(s.op == "cast" for s in narrow) and len(narrow) == outputs


def kept_lift(spec, backward, example, input_names: tuple[str, ...], cache, salt: str, versions: dict):
    """`spec`'s LiftedBackward: restored from `cache` when kept there, else lifted (and kept). A lift that fails
    raises, and is made again next time (its failure may be the moment's: memory)."""
    from harness.modules.lift_backward import lift_backward

    def lift():
        return lift_backward(backward, example, input_names, spec.cls or spec.pattern or "program", spec.dtype,
                             spec.weight_dtype)

    if cache is None:
        return lift()
    # the shape too: a symbolic case's structure key drops sizes the lifted program's case holds
    ckey = cache.derived_key(LIFTED_BACKWARD, structure=spec.structure_key(), shape=list(spec.shape),
                             module=salt, versions=versions)
    entry = cache.get(ckey)
    if entry is not None:
        try:
            return lifted_from_dict(json.loads(entry.data))
        except Exception:  # noqa: BLE001 - a kept lift that does not restore is dropped and made again
            cache.discard(ckey)
    lifted = lift()
    cache.put(ckey, LIFTED_BACKWARD, json.dumps(lifted_to_dict(lifted)).encode(), {})
    return lifted


def lifted_to_dict(lifted) -> dict:
    """A LiftedBackward as plain data: its program as source, its case's fields."""
    program = lifted.program
    return {"source": program.source, "program_inputs": list(program.inputs), "param_names": list(program.param_names),
            "case": dataclasses.asdict(lifted.case), "inputs": list(lifted.inputs), "params": dict(lifted.params),
            "ops": list(lifted.ops)}


def lifted_from_dict(d: dict):
    """The LiftedBackward `lifted_to_dict` gave: its source parsed against the names the lifter built it with (the
    same Program), and checked against its case again."""
    from harness.modules.lift_backward import LiftedBackward
    from harness.program import ProgramCase, check, parse

    c = d["case"]
    case = ProgramCase(c["dtype"], tuple(c["shape"]), c["weight_dtype"], tuple(c["extra_inputs"]),
                       {k: tuple(v) for k, v in c["param_shapes"].items()}, c["eps"],
                       {k: (tuple(shape), dtype) for k, (shape, dtype) in c["input_types"].items()})
    program = parse(d["source"], inputs=tuple(d["program_inputs"]), params=tuple(d["param_names"]))
    check(program, case)
    return LiftedBackward(program, case, tuple(d["inputs"]), dict(d["params"]), tuple(d["ops"]))


def gradient_reference(ref, names: tuple[str, ...]):
    """`ref` (the lifted backward's) as a gradient case's: each output named by its gradient and judged without
    eager (harness.oracle.compare.score: Reference.gradient), and rounded once where the backward is
    (harness.oracle.compare.out_ulps)."""
    once = rounded_once(ref)
    each = tuple(dataclasses.replace(r, gradient=True, outputs=(), names=(),
                                     rounded_once=once and r.out_dtype in NARROW) for r in ref.each)
    return dataclasses.replace(each[0], outputs=each, names=tuple(names))


def _check(evaluation, grads, why) -> dict:
    """The LiftCheck's numbers: each gradient of the lifted backward against float64 autograd's, the worst kept."""
    from harness.modules.lift_check import compare

    if grads is None:
        return {"lift_check": None, "lift_check_over_bound": None, "lift_note": f"not checked: {why}"}
    each = evaluation.each
    if len(grads) != len(each):
        return {"lift_check": float("inf"), "lift_check_over_bound": float("inf"),
                "lift_note": f"float64 autograd gives {len(grads)} gradients, the lifted backward {len(each)}"}
    checks = [compare(np.asarray(e.out, dtype=np.float64), e.bound, g) for e, g in zip(each, grads)]
    return {"lift_check": max(c[0] for c in checks), "lift_check_over_bound": max(c[1] for c in checks),
            "lift_note": None}
