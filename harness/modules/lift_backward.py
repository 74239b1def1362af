"""A gradient case's backward as a norm program: torch's joint graph, decomposed and lifted (docs/gradients.md).

The reference of a `"grad": true` case (of every kind: catalog, program,
module) is derived, not fitted: `lift_backward` takes the case's
Backward module (harness.oracle.backward), traces torch's joint
forward-backward graph (`joint_graph`), exports it, decomposes the norms'
kernels and their backward kernels into ATen primitives with torch's own
decompositions (native_layer_norm_backward, native_group_norm_backward,
native_batch_norm_backward, …) and lifts the result as a module case's
forward is lifted (harness.modules.lift): a §7 program `return d_x, d_weight,
d_bias`. Its FP64 evaluation is the reference, its running bound the bound,
its program witnesses the witnesses; `float64_gradients` is what it is
checked against (the float64 autograd of the same module), as a lift is.

The precision plan the lifted program carries is torch's decompositions',
with one choice of ours: the forward's saved statistics (mean and rstd) stay
in float32. torch's CPU kernels (and the decompositions when they trace on
CPU) round them to the input's dtype; a correct implementation keeps them in
its accumulation type, as the CUDA kernels and the decompositions off CPU do,
so a backward that saves them in float16 is measured against the bound rather
than written into it. The backward decompositions themselves upcast every
input to float32 (the computation dtype), sum in float32 and round each
gradient once: that is the correct implementation the bound is in units of.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from harness.modules import state
from harness.modules.lift import lift
from harness.modules.names import unique
from harness.program import Program, ProgramCase, check


@dataclass
class LiftedBackward:
    """A gradient case's backward lifted: its program, its case, and what the reference reads."""
    program: Program
    case: ProgramCase
    inputs: tuple[str, ...]              # the program's input names, in Backward's order (inputs, cotangents)
    params: dict[str, str]               # {state name of the forward module: program name} of what it reads
    ops: tuple[str, ...]                 # the decomposed graph's ATen ops, in order (for the record)

    @property
    def source(self) -> str:
        return self.program.source

    def arrays(self, run_arg: tuple, forward_module) -> dict[str, np.ndarray]:
        """The arrays the program reads: the inputs and cotangents by position, the parameters from the module."""
        out = dict(zip(self.inputs, run_arg))
        out.update(state.arrays(forward_module, self.params))
        return out


def _float32_stats_layer_norm(input, normalized_shape, weight, bias, eps):  # noqa: A002 - ATen's names
    """native_layer_norm with its mean and rstd kept in float32 (what the backward reads)."""
    import torch

    dims = list(range(input.dim() - len(normalized_shape), input.dim()))
    x = input.float()
    var, mean = torch.var_mean(x, dim=dims, correction=0, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    out = (x - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out.to(input.dtype), mean, rstd


def _float32_stats_group_norm(input, weight, bias, n, c, hxw, group, eps):  # noqa: A002 - ATen's names
    """native_group_norm with its mean and rstd kept in float32 (what the backward reads)."""
    import torch

    x = input.float().reshape(n, group, -1)
    var, mean = torch.var_mean(x, dim=2, correction=0, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    out = ((x - mean) * rstd).reshape(input.shape)
    channel = (1, c) + (1,) * (input.dim() - 2)
    if weight is not None:
        out = out * weight.reshape(channel)
    if bias is not None:
        out = out + bias.reshape(channel)
    return out.to(input.dtype), mean.reshape(n, group), rstd.reshape(n, group)


def _float32_stats_batch_norm(input, weight, bias, training, momentum, eps):  # noqa: A002 - ATen's names
    """_native_batch_norm_legit.no_stats (F.instance_norm's, a batch norm over the batch's own statistics) with
    its saved mean and rstd kept in float32: torch's decomposition run on the input in float32."""
    from torch._decomp.decompositions import _native_batch_norm_legit_no_stats

    out, mean, rstd = _native_batch_norm_legit_no_stats(input.float(), weight, bias, training, momentum, eps)
    return out.to(input.dtype), mean, rstd


def _group_norm_backward_in_kernel_dtypes(grad_output, input, mean, rstd, gamma, n, c, hxw, group,  # noqa: A002
                                          output_mask):
    """torch's native_group_norm_backward decomposition, each gradient cast to the kernel's dtype (the input's,
    gamma's): the decomposition computes in float32 (pw_cast_for_opmath) but returns the dtype its arguments
    promote to, float32 once the statistics are, and never casts d_gamma to gamma's dtype."""
    from torch._decomp.decompositions import native_group_norm_backward

    grads = native_group_norm_backward(grad_output, input, mean, rstd, gamma, n, c, hxw, group, output_mask)
    param = gamma.dtype if gamma is not None else input.dtype
    return tuple(None if g is None else g.to(d) for g, d in zip(grads, (input.dtype, param, param)))


def _around_a_norm(aten) -> list:
    """The backward kernels of the ops a module wraps around a norm that torch's decompositions write out (the
    activations' own backward kernels, which export keeps whole, are the lifter's: harness.modules.lift_calls)."""
    return [aten._softmax_backward_data, aten._log_softmax_backward_data]


def decompositions() -> dict:
    """torch.export's default table, the norms' backward kernels by torch's decompositions, and the norms'
    forward kernels with their statistics in float32 (layer, group, and a batch norm over its own statistics:
    F.instance_norm's)."""
    import torch
    from torch._decomp import get_decompositions

    aten = torch.ops.aten
    table = dict(torch.export.default_decompositions())
    table.update(get_decompositions([
        aten.native_layer_norm_backward, aten.native_group_norm_backward, aten.native_batch_norm_backward,
        aten._fused_rms_norm,
        aten._fused_rms_norm_backward, *_around_a_norm(aten)]))
    table[aten.native_layer_norm.default] = _float32_stats_layer_norm
    table[aten.native_group_norm.default] = _float32_stats_group_norm
    table[aten._native_batch_norm_legit.no_stats] = _float32_stats_batch_norm
    table[aten.native_group_norm_backward.default] = _group_norm_backward_in_kernel_dtypes
    return table


def cotangent_names(n: int) -> tuple[str, ...]:
    """The program's names of the cotangents of a forward of `n` outputs."""
    return ("dy",) if n == 1 else tuple(f"dy{k}" for k in range(n))


def _state_of_graph(graph_module, tensors: dict, names: dict[str, str]) -> dict[str, str]:
    """{the joint graph's attribute name: program name} of the forward module's floating state `tensors` (named
    `names`) it holds: make_fx keeps each as `_param_constantN` / `_tensor_constantN`, the very tensor, found
    by identity."""
    by_id = {id(t): names[n] for n, t in tensors.items()}
    out = {}
    for attr in dir(graph_module):
        if attr.startswith(("_param_constant", "_tensor_constant")):
            value = getattr(graph_module, attr)
            if id(value) in by_id:
                out[attr] = by_id[id(value)]
    return out


def lift_backward(backward, example: tuple, input_names: tuple[str, ...], owner: str, dtype: str,
                  weight_dtype: str) -> LiftedBackward:
    """The backward program of `backward` (harness.oracle.backward.Backward) on `example` (inputs, then one
    cotangent per forward output), its inputs named `input_names` (the forward's; x first); Unliftable for an op
    outside the language, a StageError of the export."""
    import torch

    from harness.oracle.backward import joint_graph
    from harness.paths.base import stage

    n_cot = len(example) - backward.n_inputs
    called = tuple(input_names) + cotangent_names(n_cot)
    with stage("export"):
        graph = joint_graph(backward, example)
        with torch.no_grad():
            exported = torch.export.export(graph, tuple(example))
        decomposed = exported.run_decompositions(decompositions())
    tensors = state.floating_state(backward.forward_module)
    state_names = unique(tensors, set(called) | {"x"})
    lifted = lift(decomposed, owner, called, _state_of_graph(graph, tensors, state_names))
    by_prog = {v: k for k, v in state_names.items()}
    params = {by_prog[p]: p for p in lifted.program.params}
    names = tuple(p for p, _ in lifted.inputs)
    types = {p: (tuple(t.shape), str(t.dtype).removeprefix("torch."))
             for p, t in zip(names[1:], example[1:])}
    case = ProgramCase(dtype, tuple(example[0].shape), weight_dtype, names[1:],
                       {p: tuple(tensors[s].shape) for s, p in params.items()}, 0.0, types)
    check(lifted.program, case)
    return LiftedBackward(lifted.program, case, names, params, lifted.ops)


def float64_gradients(backward, run_arg: tuple):
    """The float64 autograd of the same module on the case's rounded inputs and cotangents (a tuple of arrays),
    or the reason it cannot be run: what the lifted backward is checked against."""
    import torch

    from harness.core.tensors import to_numpy, to_torch
    from harness.modules.lift_check import _float64_mode
    from harness.oracle.backward import Backward

    try:
        twin = Backward(copy.deepcopy(backward.forward_module).double(), backward.n_inputs)
        args = [to_torch(a).double() for a in run_arg]
        with _float64_mode():
            grads = twin(*args)
    except Exception as exc:  # noqa: BLE001 - "wherever .double() works"
        text = (str(exc).strip() or type(exc).__name__).splitlines()[0][:200]
        return None, f"the module does not run in float64 ({type(exc).__name__}: {text})"
    return tuple(to_numpy(g.detach()).astype(np.float64) for g in grads), None
