"""`eager`: the torch module itself on CPU, the behaviour every path is held to."""
from __future__ import annotations

import torch

from harness.core.tensors import to_numpy, to_torch
from harness.paths import _fx_intermediates as fx
from harness.paths.base import Path, Prepared, example_args, input_arrays


class EagerPath(Path):
    name = "eager"
    description = "the torch module on CPU"
    packages = ("torch",)

    def prepare(self, spec, module, example) -> Prepared:
        def run(x):
            with torch.no_grad():
                return to_numpy(module(*(to_torch(a, spec.layout) for a in input_arrays(x))))

        return Prepared(run, {})

    def intermediates(self, spec, module, example):
        """eager's ops, read from torch.export of the module, run node by node (_fx_intermediates)."""
        with torch.no_grad():
            graph_module = torch.export.export(module, example_args(example)).module()
        return fx.fx_runner(graph_module, spec, fx.INTERPRETED.format("torch.export of the module"))
