"""A class's constructor and forward parameters, read from the AST, torch's own where the class defers.

A constructor that takes `*args`/`**kwargs` and hands them to its base (`super().__init__(*args,
**kwargs)`), or a class with no constructor of its own, takes its torch base's parameters too
(TORCH_INITS, torch 2.13's signatures).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from harness.core.eps import TORCH_NORM_EPS
from harness.zoo.classes import ClassRef

MISSING = object()  # no default
NOT_LITERAL = object()  # a default that is not a literal (kept by not passing the argument)

# torch 2.13's norm constructors: (name, default or MISSING), in order.
_BN = (("num_features", MISSING), ("eps", TORCH_NORM_EPS), ("momentum", 0.1), ("affine", True),
       ("track_running_stats", True))
_IN = (("num_features", MISSING), ("eps", TORCH_NORM_EPS), ("momentum", 0.1), ("affine", False),
       ("track_running_stats", False))
TORCH_INITS = {
    "LayerNorm": (("normalized_shape", MISSING), ("eps", TORCH_NORM_EPS), ("elementwise_affine", True), ("bias", True)),
    "RMSNorm": (("normalized_shape", MISSING), ("eps", None), ("elementwise_affine", True)),
    "GroupNorm": (("num_groups", MISSING), ("num_channels", MISSING), ("eps", TORCH_NORM_EPS), ("affine", True)),
    "BatchNorm1d": _BN, "BatchNorm2d": _BN, "BatchNorm3d": _BN, "SyncBatchNorm": _BN,
    "InstanceNorm1d": _IN, "InstanceNorm2d": _IN, "InstanceNorm3d": _IN,
    "LocalResponseNorm": (("size", MISSING), ("alpha", 1e-4), ("beta", 0.75), ("k", 1.0)),
    "Module": (),
}


@dataclass(frozen=True)
class Param:
    name: str
    default: object  # MISSING, NOT_LITERAL, or the literal value
    keyword_only: bool = False
    annotation: str = ""

    @property
    def required(self) -> bool:
        return self.default is MISSING


def _literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


def params_of(fn: ast.FunctionDef, skip_self: bool = True) -> tuple[list[Param], bool, bool]:
    """(named parameters, has *args, has **kwargs) of a function definition."""
    args = fn.args.posonlyargs + fn.args.args
    if skip_self and args:
        args = args[1:]
    defaults = [MISSING] * (len(args) - len(fn.args.defaults)) + [_literal(d) for d in fn.args.defaults]
    out = [Param(a.arg, d, False, ast.unparse(a.annotation) if a.annotation else "") for a, d in zip(args, defaults)]
    for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
        out.append(Param(a.arg, MISSING if d is None else _literal(d), True,
                         ast.unparse(a.annotation) if a.annotation else ""))
    return out, fn.args.vararg is not None, fn.args.kwarg is not None


def _torch_params(ref: ClassRef) -> list[Param]:
    base = ref.torch_norm or "torch.nn.Module"
    return [Param(n, d) for n, d in TORCH_INITS.get(base.rpartition(".")[2], ())]


def init_params(ref: ClassRef) -> list[Param]:
    """The keyword arguments the class's constructor accepts, torch's own where it passes them on.

    Base parameters the constructor already fills (positionally before `*args`, or by keyword in its
    call of the base constructor) are not offered again."""
    found = ref.method("__init__")
    if found is None:
        return _torch_params(ref)
    owner, fn = found
    own, star, starstar = params_of(fn)
    if not (star or starstar):
        return own
    base = _lib_super_params(ref, owner) or _torch_params(ref)
    positional, keywords = _base_call(fn)
    taken = {q.name for q in own} | keywords
    return own + [p for i, p in enumerate(base) if i >= positional and p.name not in taken]


def _base_call(fn: ast.FunctionDef) -> tuple[int, set[str]]:
    """(how many positional arguments before a `*args`, the keywords) of the constructor's base call:
    `super().__init__(...)` or `Base.__init__(self, ...)`."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__":
            args = list(node.args)
            owner = node.func.value
            is_super = isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super"
            if not is_super and args and isinstance(args[0], ast.Name) and args[0].id == "self":
                args = args[1:]
            n = next((i for i, a in enumerate(args) if isinstance(a, ast.Starred)), len(args))
            return n, {k.arg for k in node.keywords if k.arg}
    return 0, set()


def _lib_super_params(ref: ClassRef, owner: ClassRef) -> list[Param] | None:
    nxt = ref.super_method(owner, "__init__")
    if nxt is None:
        return None
    params, _, _ = params_of(nxt[1])
    return params


def forward_params(ref: ClassRef) -> list[Param]:
    """The forward's parameters after the input (torch's forward: none)."""
    found = ref.method("forward")
    if found is None:
        return []
    params, _, _ = params_of(found[1])
    return params[1:]
