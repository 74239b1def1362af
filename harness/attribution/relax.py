"""The intermediates of the TVM paths: the module rebuilt with every binding of `main` as an output.

The path's pipeline is repeated (torch.export, from_exported_program with the
parameters as constants, the path's decomposition pass), then `expose`
rewrites `main` so that it returns, after its own result, every tensor its
bindings compute: ToNonDataflow lets the bindings be used outside the
dataflow block, the new return tuple lists them, and ConvertToDataflow puts
the dataflow block back so FuseOps still fuses. The rebuilt module is
compiled as the path compiles (opt_level=3, llvm) and run once.

What that changes: every exposed value is written to memory in its Relax
dtype, so kernels that fused it away now store it; TVM's fused kernels keep
each op's declared dtype (an intermediate float16 value is float16 inside a
fused kernel as well), so values do not change with fusion, and the re-run's
output is compared with the path's bit for bit to check it. What an
intermediate's dtype means: its Relax dtype, the dtype the value is stored
in; a kernel could accumulate wider inside (the reduction's accumulator) and
still store float16, and the stored value is what is scored.
"""
from __future__ import annotations

import numpy as np

from harness.attribution.capture import Capture, Intermediate
from harness.paths._script_intermediates import returned_var
from harness.paths.base import example_args, input_arrays


def _tensor_bindings(func):
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
    bindings = _tensor_bindings(func)
    returned = returned_var(func)
    body = relax.SeqExpr(func.body.blocks, relax.Tuple([func.body.body, *(v for v, _ in bindings)]))
    body = relax.BlockBuilder().normalize(body)
    flat["main"] = relax.Function(func.params, body, is_pure=True, attrs=func.attrs)
    exposed = relax.transform.ConvertToDataflow()(relax.transform.Normalize()(flat))
    names = [(v.name, op) for v, op in bindings]
    output = next((i for i, (v, _) in enumerate(bindings) if returned is not None and v.same_as(returned)), None)
    return exposed, names, output


def _numpy(t) -> np.ndarray:
    import ml_dtypes

    out = np.asarray(t.numpy())
    if str(t.dtype) == "bfloat16" and out.dtype != np.dtype(ml_dtypes.bfloat16):
        out = out.view(np.uint16).view(ml_dtypes.bfloat16)
    return out.copy()


def _first_tensor(result):
    import tvm

    while not isinstance(result, tvm.runtime.Tensor):
        result = list(result)[0]
    return result


def prepare(path, module, example):
    """Rebuild `path` (a TvmPath) with every binding of main exposed: fn(x) -> Capture (one run)."""
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    with torch.no_grad():
        ep = torch.export.export(module, example_args(example))
    mod = from_exported_program(ep, keep_params_as_input=False)
    if path.decompose:
        mod = getattr(relax.transform, path.decompose)()(mod)
    exposed, names, output = expose(mod)
    with tvm.transform.PassContext(opt_level=3):
        executable = tvm.compile(exposed, target="llvm")
    device = tvm.cpu()
    main = relax.VirtualMachine(executable, device)["main"]

    def run(x) -> Capture:
        result = list(main(*(tvm.runtime.tensor(np.ascontiguousarray(a), device) for a in input_arrays(x))))
        values = [_numpy(t) for t in result[1:]]
        inters = [Intermediate(name, op, str(v.dtype), v) for (name, op), v in zip(names, values)]
        return Capture(inters, output, _numpy(_first_tensor(result[0])),
                       method="every binding of main returned as an output, recompiled")

    return run
