"""A norm's backward as a module of its own: what every path compiles for a gradient case (docs/gradients.md).

`Backward(module, n_inputs)` runs the norm forward and returns the
vector-Jacobian products with the cotangents it is given: forward(*inputs,
*cotangents) -> (the gradient of each input, then of each floating parameter
in the module's order). Run eagerly it is torch autograd (the `eager` path);
`joint_graph` traces it into torch's joint forward-backward graph of ATen ops
(`native_layer_norm_backward` and the like, as autograd dispatches them), the
graph that paths compiling an inference graph export; a path with a training
flow of its own (a compiled backward, TVM's Gradient) takes `forward_module`.
"""
from __future__ import annotations

import torch
from torch import nn


def floating_parameters(module: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """The module's floating parameters in its own order (named_parameters), each one's gradient an output."""
    return [(name, p) for name, p in module.named_parameters() if p.is_floating_point()]


def gradient_names(input_names, module: nn.Module) -> tuple[str, ...]:
    """The outputs of a gradient case: d_ and each input's name, then each floating parameter's (its last part)."""
    return tuple(f"d_{n}" for n in input_names) + tuple(
        f"d_{name.rpartition('.')[2]}" for name, _ in floating_parameters(module))


class Backward(nn.Module):
    """forward(*inputs, *cotangents) -> the gradients of the inputs, then of the floating parameters."""

    def __init__(self, forward_module: nn.Module, n_inputs: int):
        super().__init__()
        self.forward_module = forward_module
        self.n_inputs = n_inputs
        for _, p in floating_parameters(forward_module):
            p.requires_grad_(True)  # a program module holds its parameters frozen: here they are differentiated

    def forward(self, *args):
        inputs, cotangents = args[:self.n_inputs], args[self.n_inputs:]
        params = [p for _, p in floating_parameters(self.forward_module)]
        with torch.enable_grad():
            leaves = [a.detach().requires_grad_(True) for a in inputs]
            out = self.forward_module(*leaves)
            outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
            grads = torch.autograd.grad(outs, leaves + params, cotangents, allow_unused=True)
        # an input or parameter the output does not depend on has a zero gradient (autograd says None)
        return tuple(torch.zeros_like(t) if g is None else g for g, t in zip(grads, leaves + params))


def joint_graph(backward: Backward, example: tuple) -> torch.fx.GraphModule:
    """torch's joint forward-backward graph of `backward` on `example` (inputs then cotangents), as ATen ops.

    torch.export cannot trace autograd.grad inside a forward (it finds the
    autograd graph's tensors as constants), so the backward is first traced by
    make_fx, which records the ATen ops autograd dispatches; that graph is an
    ordinary module which torch.export (and every exporting path) takes.
    """
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(backward)(*example)
