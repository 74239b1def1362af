"""`eager`: the torch module itself on CPU, the behaviour every path is held to."""
from __future__ import annotations

import torch

from harness.core.tensors import to_numpy, to_torch
from harness.paths.base import Path, Prepared, input_arrays


class EagerPath(Path):
    name = "eager"
    description = "the torch module on CPU"
    packages = ("torch",)

    def prepare(self, spec, module, example) -> Prepared:
        def run(x):
            with torch.no_grad():
                return to_numpy(module(*(to_torch(a, spec.layout) for a in input_arrays(x))))

        return Prepared(run, {})
