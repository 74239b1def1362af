"""A module case's parameters and buffers: their program names, the spec's redraw, their values for the reference.

`params` "init" keeps the constructor's values; "ones" and "normal" redraw
every floating parameter and buffer by its program name, with the very
function a program case draws its parameters with
(harness.oracle.inputs.draw_named_params), so a module case and its lifted
program spec hold the same values.
"""
from __future__ import annotations

import numpy as np

from harness.core.dtypes import cast
from harness.core.tensors import to_numpy, to_torch
from harness.modules.names import unique
from harness.oracle.inputs import draw_named_params


def floating_state(module) -> dict:
    """{state name: tensor} of every floating parameter and buffer, sorted by name."""
    tensors = dict(module.named_parameters())
    tensors.update((n, b) for n, b in module.named_buffers() if b is not None)
    return {n: tensors[n] for n in sorted(tensors) if tensors[n].is_floating_point()}


def state_names(module, taken: set[str]) -> dict[str, str]:
    """{state name: program name} of the floating state, sorted by state name."""
    return unique(floating_state(module), taken)


def redraw(module, spec, names: dict[str, str]) -> None:
    """Set every floating parameter and buffer to the spec's `ones`/`normal` draw (nothing for `init`)."""
    import torch

    kind = spec.params_dict["kind"]
    if kind == "init":
        return
    state = floating_state(module)
    drawn = draw_named_params(kind, spec.seed, [(names[n], tuple(t.shape)) for n, t in state.items()])
    with torch.no_grad():
        for name, tensor in state.items():
            dtype = str(tensor.dtype).removeprefix("torch.")
            tensor.copy_(to_torch(cast(drawn[names[name]], dtype)))


def arrays(module, names: dict[str, str]) -> dict[str, np.ndarray]:
    """{program name: the tensor's exact values} for the names given."""
    state = floating_state(module)
    return {prog: to_numpy(state[name]) for name, prog in names.items() if name in state}


def is_constant(array: np.ndarray) -> bool:
    return array.size == 0 or bool(np.all(array == array.reshape(-1)[0]))
