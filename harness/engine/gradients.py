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
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from harness.core.dtypes import DTYPES, narrowest
from harness.core.records import LiftCheck


@dataclass(frozen=True)
class GradientParts:
    """What the engine's Setup of a gradient case holds."""
    inputs: object        # harness.oracle.inputs.Inputs, with its cotangents
    ref: object           # harness.oracle.reference.Reference, one output per gradient
    build: object         # () -> (Backward(module, n), example: inputs then cotangents, as tensors)
    lift: LiftCheck       # the lifted backward and its check against float64 autograd


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


def gradient_parts(spec, make_forward, inputs, input_names: tuple[str, ...], memo: dict) -> GradientParts:
    """The gradient case of `spec`: `make_forward()` builds a fresh forward module with the case's parameters,
    `inputs` are the forward's (harness.oracle.inputs.Inputs), `input_names` the forward's names of them (x
    first); `memo` keeps each structure's lifted backward (the program depends on the structure alone)."""
    from harness.modules.lift_backward import cotangent_names, float64_gradients, lift_backward
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
        memo[key] = lift_backward(backward, example, input_names, spec.cls or spec.pattern or "program",
                                  spec.dtype, spec.weight_dtype)
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
    return GradientParts(inputs, ref, build, lift)


# the dtypes narrower than float32 (float16, bfloat16): a gradient in one of them is rounded from float32
NARROW = tuple(d for d in DTYPES if narrowest(d, "float32") != "float32")


def rounded_once(ref) -> bool:
    """Whether the lifted backward computes in float32 and rounds each gradient once: its only stages narrower
    than float32 are casts, one per narrower gradient (the lifter's precision plan, docs/gradients.md). A
    program that rounds an intermediate into float16 or bfloat16 (a program written in float16) is not."""
    narrow = [s for s in ref.stages if s.dtype in NARROW]
    outputs = sum(r.out_dtype in NARROW for r in ref.each)
    return bool(narrow) and all(s.op == "cast" for s in narrow) and len(narrow) == outputs


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
