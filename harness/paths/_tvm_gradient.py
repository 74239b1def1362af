"""TVM's training flow for a gradient case (`tvm`, `tvm-decompose`; docs/gradients.md "How each path trains").

    torch.export of vjp_target(norm): forward(*inputs, *cotangents) = sum(out * cotangent)
      -> from_exported_program(keep_params_as_input=True)        (stage "compile", step "import")
      -> [relax.transform.DecomposeOpsForTraining]                (tvm-decompose)
      -> relax.transform.Gradient("main", inputs and parameters)  (step "gradient")
      -> main_adjoint as main, the parameters bound as constants
      -> tvm.compile(target="llvm") -> Relax VM                   (stage "compile")

Choices, written down:

* Gradient differentiates a scalar (its target must be a 0-dim tensor), so the
  function it is given returns sum(out * cotangent): the adjoint of each output
  is then its cotangent exactly (the sum's adjoint is ones), whatever the sum's
  own value rounds to. The vector-Jacobian products are what the Backward
  module returns, in its order: each input's gradient, then each floating
  parameter's, in the module's order (the importer keeps that order).
* The parameters are imported as inputs (Gradient differentiates only a
  function's parameters) and bound back as constants after Gradient, so the
  compiled `main` takes the inputs and the cotangents only, as a forward case's
  takes its inputs.
* An op Relax registers no gradient for (its FPrimalGradient: rms_norm,
  group_norm, instance_norm, and layer_norm itself unless decomposed) makes
  the case `unsupported` with the ops named, checked before Gradient runs.
  bfloat16 is refused by Gradient itself ("Only Tensors of floating point
  dtype"), an `unsupported` with TVM's words.
"""
from __future__ import annotations

from harness.paths.base import Unsupported

# What relax.transform.Gradient says when it refuses a dtype (bfloat16 in TVM 0.27): a documented refusal.
REFUSED_DTYPE = "Only Tensors of floating point dtype"


def vjp_target(norm, n_inputs: int):
    """A module whose forward(*inputs, *cotangents) is the sum of out * cotangent over the norm's outputs: the
    scalar relax.transform.Gradient differentiates (its gradient w.r.t. an output is that output's cotangent)."""
    import torch

    class VjpTarget(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = norm

        def forward(self, *args):
            out = self.norm(*args[:n_inputs])
            outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            total = None
            for o, c in zip(outs, args[n_inputs:]):
                term = (o * c).sum()
                total = term if total is None else total + term
            return total

    return VjpTarget()


def no_gradient_ops(ops: list[str]) -> list[str]:
    """The Relax ops among `ops` (names) that register no gradient (no FPrimalGradient attribute)."""
    import tvm

    return [name for name in ops if tvm.ir.Op.get(name).get_attr("FPrimalGradient") is None]


def gradient_module(mod, n_inputs: int):
    """relax.transform.Gradient of `mod`'s main (imported with keep_params_as_input=True) w.r.t. its first
    `n_inputs` inputs and its floating parameters; main_adjoint returned as `main`, the parameters bound."""
    import tvm
    from tvm import relax

    main = mod["main"]
    n_user = int(main.attrs["num_input"])
    values = list(main.attrs["params"])
    params = list(main.params[n_user:])
    floating = [p for p in params if "float" in str(getattr(p.ty, "dtype", ""))]
    mod = relax.transform.Gradient("main", require_grads=list(main.params[:n_inputs]) + floating)(mod)
    adjoint = mod["main_adjoint"].with_attr("global_symbol", "main")
    bind = relax.transform.BindParams("main", dict(zip(adjoint.params[n_user:], values)))
    return bind(tvm.IRModule({"main": adjoint}))


def imported_vjp(ep):
    """The Relax module of the vjp target's ExportedProgram `ep`: its parameters as inputs (Gradient
    differentiates only a function's parameters), its scalar unwrapped."""
    from tvm.relax.frontend.torch import from_exported_program

    return from_exported_program(ep, keep_params_as_input=True, unwrap_unit_return_tuple=True)


def differentiated(mod, n_inputs: int, ops: list[str]):
    """gradient_module(mod, n_inputs), or Unsupported where Relax cannot differentiate it: an op of `ops`
    (main's) without a registered gradient, or a dtype Gradient refuses. Any other failure is raised as it is."""
    missing = no_gradient_ops(ops)
    if missing:
        raise Unsupported(f"Relax registers no gradient for {', '.join(missing)} "
                          "(relax.transform.Gradient cannot differentiate it)")
    try:
        return gradient_module(mod, n_inputs)
    except Exception as exc:  # noqa: BLE001 - the dtype Gradient refuses is a documented refusal; others are errors
        if REFUSED_DTYPE in str(exc):
            line = next((ln for ln in str(exc).splitlines() if REFUSED_DTYPE in ln), REFUSED_DTYPE)
            raise Unsupported(f"relax.transform.Gradient refuses the dtype: {line.strip()}") from exc
        raise
