"""The norm program IR (DESIGN §7): what `parse` turns user text into.

User text is never executed; every later stage (static check, torch module,
FP64 interpreter) walks these frozen dataclasses instead. Arguments are
normalised here (keywords bound, defaults resolved where torch's are fixed),
so the walkers never see Python syntax. `ProgramCase` is the little the
program layer needs to know about a case.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.core.dtypes import DTYPES

INPUTS = ("x", "y", "r")
PARAMS = ("w", "b", "s")


class ProgramError(ValueError):
    """A program that is not in the language, or ill-typed for its case (one line)."""


# ---------------------------------------------------------------- expressions
@dataclass(frozen=True)
class Name:
    id: str


@dataclass(frozen=True)
class Number:
    value: int | float


@dataclass(frozen=True)
class DType:
    """torch.float32 / torch.float16 / torch.bfloat16 (by dtype name)."""
    name: str


@dataclass(frozen=True)
class DTypeOf:
    """NAME.dtype."""
    name: str


@dataclass(frozen=True)
class ShapeOf:
    """NAME.shape[K] (a Python int)."""
    name: str
    index: int


@dataclass(frozen=True)
class BinOp:
    op: str  # add sub mul div pow
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Neg:
    operand: Expr


@dataclass(frozen=True)
class Cast:
    """A dtype conversion, spelled as written.

    spelling: "to" (.to(dtype[, memory_format=…])), "float", "half", "bfloat16"
    or "type_as". `to` is a DType or DTypeOf (None for type_as), `like` the
    tensor expression of .type_as(T).
    """
    operand: Expr
    spelling: str
    to: DType | DTypeOf | None = None
    like: Expr | None = None
    contiguous: bool = False


@dataclass(frozen=True)
class Unary:
    op: str  # rsqrt sqrt abs square reciprocal
    operand: Expr


@dataclass(frozen=True)
class Reduce:
    """mean / sum / var; dims None reduces every dim (torch's dim=None)."""
    op: str
    operand: Expr
    dims: tuple[int, ...] | None = None
    keepdim: bool = False
    correction: int | float | None = None  # var only; None is torch's default (1)


@dataclass(frozen=True)
class Norm:
    """F.layer_norm / F.rms_norm / F.group_norm with bound arguments."""
    kind: str
    operand: Expr
    normalized_shape: tuple[Expr, ...] | None = None  # layer/rms: Numbers or ShapeOfs
    groups: Expr | None = None  # group_norm
    weight: Expr | None = None
    bias: Expr | None = None
    eps: Expr | None = None  # None: torch's default for the kind


Expr = Name | Number | ShapeOf | BinOp | Neg | Cast | Unary | Reduce | Norm


# ----------------------------------------------------------------- statements
@dataclass(frozen=True)
class Assign:
    name: str
    value: Expr
    line: int


@dataclass(frozen=True)
class Return:
    value: Expr
    line: int


@dataclass(frozen=True)
class Program:
    """A parsed program: its normalised source, statements and the names it reads."""
    source: str
    statements: tuple[Assign | Return, ...]
    reads: tuple[str, ...]  # among x y r w b s eps, in that order
    inputs: tuple[str, ...] = ("x",)  # the inputs it was parsed against

    @property
    def params(self) -> tuple[str, ...]:
        """The parameters (w, b, s) the program reads."""
        return tuple(n for n in PARAMS if n in self.reads)

    @property
    def extra_inputs(self) -> tuple[str, ...]:
        """The extra inputs (y, r) the program reads, sorted (forward's order)."""
        return tuple(sorted(n for n in ("y", "r") if n in self.reads))


# ------------------------------------------------------------------ case info
@dataclass(frozen=True)
class ProgramCase:
    """What a program needs to know about its case (mapped from the spec by the caller)."""
    dtype: str
    shape: tuple[int, ...]
    weight_dtype: str | None = None  # None: = dtype
    extra_inputs: tuple[str, ...] = ()
    param_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    eps: float = 1e-5

    def __post_init__(self):
        shape = tuple(int(n) for n in self.shape)
        if self.dtype not in DTYPES:
            raise ValueError(f"ProgramCase: dtype {self.dtype!r} is not one of {DTYPES}")
        wdt = self.weight_dtype or self.dtype
        if wdt not in DTYPES:
            raise ValueError(f"ProgramCase: weight_dtype {wdt!r} is not one of {DTYPES}")
        if not shape or any(n < 1 for n in shape):
            raise ValueError(f"ProgramCase: shape {list(shape)} needs at least one dim, all >= 1")
        extra = tuple(sorted(set(self.extra_inputs)))
        if any(n not in ("y", "r") for n in extra):
            raise ValueError(f"ProgramCase: extra_inputs {extra} may only name 'y' and 'r'")
        shapes = {n: (shape[-1],) for n in PARAMS}
        for name, value in dict(self.param_shapes).items():
            if name not in PARAMS:
                raise ValueError(f"ProgramCase: param_shapes names {name!r}, not one of {PARAMS}")
            shapes[name] = tuple(int(n) for n in value)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "weight_dtype", wdt)
        object.__setattr__(self, "extra_inputs", extra)
        object.__setattr__(self, "param_shapes", shapes)
        object.__setattr__(self, "eps", float(self.eps))

    def __hash__(self):
        return hash((self.dtype, self.shape, self.weight_dtype, self.extra_inputs,
                     tuple(sorted(self.param_shapes.items())), self.eps))

    @property
    def inputs(self) -> tuple[str, ...]:
        return ("x",) + self.extra_inputs
