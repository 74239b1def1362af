"""Fixtures shared by the program tests: random rounded arrays and running a program eagerly."""
import numpy as np
import pytest
import torch

from harness.core.dtypes import np_dtype
from harness.core.tensors import to_numpy, to_torch
from harness.program import ProgramCase, build_program_module, parse


def _arrays(case: ProgramCase, seed=0, offset=0.0, std=1.0, params="normal"):
    """x (and y, r) ~ normal(offset, std), parameters normal (or ones/zeros), rounded to their dtypes."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in case.inputs:
        out[name] = (rng.standard_normal(case.shape) * std + offset).astype(np_dtype(case.dtype))
    for name in ("w", "b", "s"):
        shape = case.param_shapes[name]
        if params == "ones":
            value = np.zeros(shape) if name == "b" else np.ones(shape)
        else:
            value = rng.standard_normal(shape)
        out[name] = value.astype(np_dtype(case.weight_dtype))
    return out


def _eager(program, case, arrays):
    """The program's torch module run on `arrays`: (output as float64 NumPy, torch dtype name)."""
    module = build_program_module(program, case, arrays)
    with torch.no_grad():
        out = module(*(to_torch(arrays[n]) for n in case.inputs))
    return to_numpy(out).astype(np.float64), str(out.dtype).removeprefix("torch.")


@pytest.fixture
def arrays():
    return _arrays


@pytest.fixture
def eager():
    return _eager


@pytest.fixture
def program():
    return lambda source, case: parse(source, case=case)
