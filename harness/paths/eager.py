"""`eager`: the torch module itself on CPU, the behaviour every path is held to."""
from __future__ import annotations

import torch

from harness.core.tensors import to_numpy, to_torch
from harness.paths import _fx_intermediates as fx
from harness.paths._executorch_common import op_name
from harness.paths.base import (Path, Prepared, dynamic_of, example_args, export_program, input_arrays, is_backward,
                                symbolic_export, symbolic_shapes)


def eager_output(model, example):
    """The model's output on `example` (the tuple of its input tensors), as NumPy, without autograd."""
    with torch.no_grad():
        return to_numpy(model(*example))


class EagerPath(Path):
    name = "eager"
    description = "the torch module on CPU"
    packages = ("torch",)
    pipeline = (eager_output, is_backward, symbolic_shapes, export_program, symbolic_export, op_name,
                fx.fx_intermediates)
    has_intermediates = True
    trains = "torch autograd"
    symbolic = "any size: the module itself runs eagerly"

    def script_calls(self) -> str:
        return f'''\
def run_path(model, example, x):
    """{self.name}: {self.description}"""
    return eager_output(model, example)


def intermediates(model, example, x):
    """The module's torch.export run node by node, every node's value kept (for the stage table)."""
    return fx_intermediates(export_program(model, example, DYNAMIC).module(), example)
'''

    def prepare(self, spec, module, example) -> Prepared:
        def run(x):
            return eager_output(module, tuple(to_torch(a, spec.layout) for a in input_arrays(x)))

        return Prepared(run, {})

    def intermediates(self, spec, module, example):
        """eager's ops, read from torch.export of the module, run node by node (_fx_intermediates)."""
        graph_module = export_program(module, example_args(example), dynamic_of(spec)).module()
        return fx.fx_runner(graph_module, spec, fx.INTERPRETED.format("torch.export of the module"))
