"""A program as a torch nn.Module: the module every path exports (docs/contracts.md §7).

forward() walks the IR calling the very torch functions and Python operators
a hand-written module would (`a * b`, `torch.rsqrt(t)`, `t.mean(dim,
keepdim=…)`, `F.layer_norm`), so eager bits and torch.export graphs are the
same as for the equivalent model code.
"""
from __future__ import annotations

import importlib
import operator

import ml_dtypes
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from harness.core.dtypes import torch_dtype
from harness.core.eps import torch_norm_eps
from harness.program import ops
from harness.program.typecheck import check
from harness.program.ir import Program, ProgramCase, ones_value
from harness.program.walk import Walker

_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
        "pow": operator.pow}


def _resolve(dotted: str):
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


# an elementwise op's torch callable (the op table's `torch`), resolved once
_UNARY = {name: _resolve(ops.get(name).torch) for name in ops.UNARY}


_index_key = ops.index_key


# a shape op as the model code writes it (the tensor method of the same name)
_SHAPE = {
    "unsqueeze": lambda t, a: t.unsqueeze(a[0]), "squeeze": lambda t, a: t.squeeze(*a) if a else t.squeeze(),
    "view": lambda t, a: t.view(*a), "reshape": lambda t, a: t.reshape(*a), "expand": lambda t, a: t.expand(*a),
    "permute": lambda t, a: t.permute(*a), "transpose": lambda t, a: t.transpose(*a),
    "contiguous": lambda t, a: t.contiguous(), "narrow": lambda t, a: t.narrow(*a),
    "index": lambda t, a: t[_index_key(a)],
}


# a call op's torch callable (the op table's `torch`: `a @ b` is operator.matmul), resolved once; it takes the
# operands, then the op's options as keywords (each spelled as torch's parameter)
_CALL = {name: _resolve(ops.get(name).torch) for name in ops.CALL}


class TorchWalker(Walker):
    """Evaluates the IR with real torch calls."""

    def shape(self, t):
        return tuple(t.shape)

    def dtype(self, t):
        return str(t.dtype).removeprefix("torch.")

    def binop(self, op, a, b):
        return _OPS[op](a, b)

    def neg(self, t):
        return -t

    def cast(self, node, t, dtype, like):
        if node.spelling == "type_as":
            return t.type_as(like)
        if node.spelling == "float":
            return t.float()
        if node.spelling == "half":
            return t.half()
        if node.spelling == "bfloat16":
            return t.bfloat16()
        if node.contiguous:
            return t.to(torch_dtype(dtype), memory_format=torch.contiguous_format)
        return t.to(torch_dtype(dtype))

    def unary(self, op, t):
        return _UNARY[op](t)

    def reduce(self, node, t):
        method = getattr(t, node.op)
        kwargs = {}
        if node.keepdim:
            kwargs["keepdim"] = True
        if node.correction is not None:
            kwargs["correction"] = node.correction
        if node.dims is None:
            return method(**kwargs) if kwargs else method()
        dim = node.dims[0] if len(node.dims) == 1 else list(node.dims)
        return method(dim, **kwargs)

    def shape_op(self, op, t, args):
        return _SHAPE[op](t, args)

    def cat(self, ts, dim):
        return torch.cat(ts, dim)

    def linear(self, t, weight, bias):
        return F.linear(t, weight, bias)

    def call(self, op, ts, options):
        return _CALL[op](*ts, **{o.name: options[o.name] for o in ops.get(op).options})

    def norm(self, node, t, normalized_shape, groups, weight, bias, eps):
        if node.kind == "layer_norm":
            return F.layer_norm(t, list(normalized_shape), weight, bias, torch_norm_eps("layer_norm", eps))
        if node.kind == "rms_norm":
            return F.rms_norm(t, list(normalized_shape), weight, eps)
        return F.group_norm(t, groups, weight, bias, torch_norm_eps("group_norm", eps))


class ProgramModule(nn.Module):
    """Runs a Program; holds the parameters it reads (w, b, s, or the names the case declares) and eps."""

    def __init__(self, program: Program, case: ProgramCase):
        super().__init__()
        check(program, case)
        self.program = program
        self.case = case
        self.eps = float(case.eps)
        self.input_names = ("x",) + case.extra_inputs
        wdt = torch_dtype(case.weight_dtype)
        for name in program.params:
            self.register_parameter(name, nn.Parameter(torch.full(case.param_shapes[name], ones_value(name),
                                                                  dtype=wdt)))

    def run(self, *tensors):
        env = dict(zip(self.input_names, tensors))
        env["eps"] = self.eps
        for name in self.program.params:
            env[name] = getattr(self, name)
        return TorchWalker(env).run(self.program)

    def forward(self, x):  # overridden per input signature below
        return self.run(x)


class _WithR(ProgramModule):
    def forward(self, x, r):
        return self.run(x, r)


class _WithY(ProgramModule):
    def forward(self, x, y):
        return self.run(x, y)


class _WithRY(ProgramModule):
    def forward(self, x, r, y):
        return self.run(x, r, y)


class _WithExtra(ProgramModule):
    """Extra inputs with other names than y and r: forward(x, *extra), in the case's sorted order."""

    def forward(self, x, *extra):
        return self.run(x, *extra)


_CLASSES = {(): ProgramModule, ("r",): _WithR, ("y",): _WithY, ("r", "y"): _WithRY}


def array_to_torch(a: np.ndarray) -> torch.Tensor:
    """A tensor with exactly the bits of `a` (bfloat16 via ml_dtypes)."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.dtype(ml_dtypes.bfloat16):
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def build_program_module(program: Program, info: ProgramCase, params: dict | None = None) -> nn.Module:
    """The eval-mode module of `program`; forward(x[, r][, y]): x, then the case's extra inputs sorted.

    Parameters the program reads are copied bit-exactly from `params` (NumPy
    arrays; bfloat16 as ml_dtypes.bfloat16); one not given stays ones (w, s)
    or zeros (b).
    """
    module = _CLASSES.get(info.extra_inputs, _WithExtra)(program, info)
    with torch.no_grad():
        for name in program.params:
            if params is not None and name in params:
                value = array_to_torch(np.asarray(params[name]))
                target = getattr(module, name)
                if tuple(value.shape) != tuple(target.shape):
                    raise ValueError(f"parameter {name!r} has shape {list(value.shape)}, "
                                     f"the case says {list(target.shape)}")
                if value.dtype != target.dtype:
                    raise ValueError(f"parameter {name!r} is {value.dtype}, the case says {target.dtype}")
                target.copy_(value)
    return module.eval()
