"""The TVM paths' intermediates: the module rebuilt with every binding of `main` as an output.

The path's own pipeline (harness/paths/tvm.py: torch.export,
from_exported_program with the parameters as constants, the path's
decomposition pass) builds the module, then `expose` rewrites `main` so that it returns, after its own result, every tensor its
bindings compute: ToNonDataflow lets the bindings be used outside the
dataflow block, the new return tuple lists them, and ConvertToDataflow puts
the dataflow block back so FuseOps still fuses. The rebuilt module is
compiled as the path compiles (opt_level=3, llvm) and run.

What that changes: every exposed value is written to memory in its Relax
dtype, so kernels that fused it away now store it; TVM's fused kernels keep
each op's declared dtype (an intermediate float16 value is float16 inside a
fused kernel as well), so values do not change with fusion, and the re-run's
output is compared with the path's bit for bit to check it. What an
intermediate's dtype means: its Relax dtype, the dtype the value is stored
in; a kernel could accumulate wider inside (the reduction's accumulator) and
still store float16, and the stored value is what is scored.

The functions below use only numpy, ml_dtypes, torch and tvm, so the TVM
repro scripts carry them as their source (the TVM paths' `pipeline`): the
script's stage table reads the very values attribution reads.
"""
from __future__ import annotations

import numpy as np


def returned_var(func):
    """The tensor variable a Relax `func` returns (through the importer's one-element tuple), or None."""
    from tvm import relax

    bound = {b.var: b.value for block in func.body.blocks for b in block.bindings}
    expr = func.body.body
    for _ in range(len(bound) + 1):
        if isinstance(expr, relax.Tuple) and len(expr.fields) == 1:
            expr = expr.fields[0]
        elif isinstance(expr, relax.Var) and isinstance(bound.get(expr), (relax.Tuple, relax.Var)):
            expr = bound[expr]
        else:
            break
    return expr if isinstance(expr, relax.Var) else None


def tensor_bindings(func):
    """[(var, op name)] of the bindings of `func` that call a Relax op and give a tensor."""
    import tvm
    from tvm import relax

    out = []
    for block in func.body.blocks:
        for binding in block.bindings:
            value = getattr(binding, "value", None)
            if (isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op)
                    and isinstance(binding.var.ty, relax.TensorType)):
                out.append((binding.var, str(value.op.name)))
    return out


def expose(mod):
    """(module whose main returns (its result, *intermediates), [(name, op)], index of the returned one)."""
    from tvm import relax

    flat = relax.transform.ToNonDataflow()(mod)
    func = flat["main"]
    bindings = tensor_bindings(func)
    returned = returned_var(func)
    body = relax.SeqExpr(func.body.blocks, relax.Tuple([func.body.body, *(v for v, _ in bindings)]))
    body = relax.BlockBuilder().normalize(body)
    flat["main"] = relax.Function(func.params, body, is_pure=True, attrs=func.attrs)
    exposed = relax.transform.ConvertToDataflow()(relax.transform.Normalize()(flat))
    names = [(v.name, op) for v, op in bindings]
    output = next((i for i, (v, _) in enumerate(bindings) if returned is not None and v.same_as(returned)), None)
    return exposed, names, output


def tvm_array(t):
    """A NumPy copy of a TVM tensor in TVM's own dtype (bfloat16 as ml_dtypes.bfloat16)."""
    import ml_dtypes

    out = np.asarray(t.numpy())
    if str(t.dtype) == "bfloat16" and out.dtype != np.dtype(ml_dtypes.bfloat16):
        out = out.view(np.uint16).view(ml_dtypes.bfloat16)  # a build that returns the raw bits: re-label only
    return out.copy()


METHOD = "every binding of main returned as an output, recompiled"
