"""The norm program IR (docs/contracts.md §7): what `parse` turns user text into.

User text is never executed; every later stage (static check, torch module,
FP64 interpreter) walks these frozen dataclasses instead. Arguments are
normalised here (keywords bound, defaults resolved where torch's are fixed),
so the walkers never see Python syntax. `ProgramCase` is the little the
program layer needs to know about a case.
"""
from __future__ import annotations

import keyword
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass

from harness.core.dtypes import DTYPES
from harness.core.eps import TORCH_NORM_EPS

INPUTS = ("x", "y", "r")  # x, and the extra inputs a program may read without declaring them
PARAMS = ("w", "b", "s")  # the parameters a program may read without declaring them ([last dim of x])


def param_order(names) -> tuple[str, ...]:
    """Parameters in the order they are drawn and passed: w, b, s, then any others by name."""
    names = set(names)
    return tuple(n for n in PARAMS if n in names) + tuple(sorted(names - set(PARAMS)))


class ProgramError(ValueError):
    """A program that is not in the language, or ill-typed for its case (one line)."""


def ones_value(name: str) -> float:
    """A parameter's value under the `ones` params kind: 0 for a shift (b, a bias, a mean), else 1."""
    return 0.0 if name == "b" or any(k in name.lower() for k in ("bias", "mean", "shift", "beta")) else 1.0


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
    op: str  # add sub mul div pow; floordiv (//) between ints only (sizes: x.shape[-1] // 2)
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
    op: str  # an elementwise op of harness.program.ops (rsqrt sqrt abs square reciprocal silu sigmoid …)
    operand: Expr


@dataclass(frozen=True)
class ShapeOp:
    """A shape op of harness.program.ops (unsqueeze, view, permute, narrow, …): exact, no rounding.

    `args` are int expressions (numbers, NAME.shape[K] and arithmetic on
    them) except for "index" (t[:, None, ...], t[..., :d // 2]), whose args
    are the index's items: ":", "None", "..." as text, or an IndexSlice.
    """
    op: str
    operand: Expr
    args: tuple = ()


@dataclass(frozen=True)
class Cat:
    """torch.cat([a, b, …], dim): exact, no rounding (floating operands promote to one dtype, a widening)."""
    tensors: tuple
    dim: int = 0


@dataclass(frozen=True)
class Linear:
    """F.linear(input, weight, bias=None): x @ weight.T + bias."""
    operand: Expr
    weight: Expr
    bias: Expr | None = None


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


@dataclass(frozen=True)
class IndexSlice:
    """A contiguous slice `lower:upper` inside an index (t[..., :d // 2]); either bound may be None (an end).
    The bounds are int expressions (numbers, NAME.shape[K] and arithmetic on them)."""
    lower: Expr | None = None
    upper: Expr | None = None


@dataclass(frozen=True)
class Call:
    """An op of the op table's kind "call" (matmul, softmax, cumsum, gelu, elu, hardswish, the pools,
    interpolate, clamp, ones_like): its tensor operands and its options.

    `options` are (name, value) pairs for every option of the op, in the op
    table's order, defaults filled in (so two spellings of one call are one
    IR): ints, tuples of ints, floats, strings, bools or None.
    """
    op: str
    operands: tuple
    options: tuple = ()

    def option(self, name: str):
        return dict(self.options)[name]


Expr = Name | Number | ShapeOf | BinOp | Neg | Cast | Unary | Reduce | Norm | ShapeOp | Cat | Linear | Call


# ----------------------------------------------------------------- statements
@dataclass(frozen=True)
class Assign:
    name: str
    value: Expr
    line: int


@dataclass(frozen=True)
class Outputs:
    """`return a, b`: the several outputs of a program, in order (only ever a Return's value)."""
    values: tuple


@dataclass(frozen=True)
class Return:
    value: Expr | Outputs
    line: int

    @property
    def values(self) -> tuple:
        """The returned expressions, one per output."""
        return self.value.values if isinstance(self.value, Outputs) else (self.value,)


@dataclass(frozen=True)
class Program:
    """A parsed program: its normalised source, statements and the names it reads."""
    source: str
    statements: tuple[Assign | Return, ...]
    reads: tuple[str, ...]  # x, the extra inputs (sorted), the parameters (param_order), eps: those read
    inputs: tuple[str, ...] = ("x",)  # the inputs it was parsed against
    param_names: tuple[str, ...] = PARAMS  # the parameters it was parsed against

    @property
    def params(self) -> tuple[str, ...]:
        """The parameters the program reads, in param_order."""
        return param_order(n for n in self.reads if n in self.param_names)

    @property
    def extra_inputs(self) -> tuple[str, ...]:
        """The extra inputs the program reads, sorted (forward's order)."""
        return tuple(sorted(n for n in self.reads if n in self.inputs and n != "x"))

    @property
    def output_names(self) -> tuple[str, ...]:
        """Each output's name: the name it returns (`return y, r`), else its position ("0", "1", ...)."""
        return output_names(self.statements[-1].values)


def is_node(value) -> bool:
    """Whether `value` is an IR node (an instance of one of the dataclasses above)."""
    return is_dataclass(value) and not isinstance(value, type)


def children(node):
    """The IR nodes `node` holds directly, in field order (a tuple field's in order)."""
    if is_node(node):
        for f in fields(node):
            value = getattr(node, f.name)
            for item in value if isinstance(value, tuple) else (value,):
                if is_node(item):
                    yield item


def squared(node, same=operator.eq):
    """B when `node` squares B: B ** 2, B.square(), or B * B (both sides `same`: equal trees by default); else
    None. What a mean of squares is taken of, for the statistics a program names and the benchmark's rewrites."""
    if isinstance(node, BinOp):
        if node.op == "pow" and isinstance(node.right, Number) and node.right.value == 2:
            return node.left
        if node.op == "mul" and same(node.left, node.right):
            return node.left
    if isinstance(node, Unary) and node.op == "square":
        return node.operand
    return None


def output_names(values) -> tuple[str, ...]:
    """The names of returned expressions: a returned name once among them is its own, any other its position.

    A record names its outputs by these (docs/contracts.md §4), so they are decided here, once."""
    ids = [v.id if isinstance(v, Name) else None for v in values]
    return tuple(i if i is not None and ids.count(i) == 1 and not i.isdigit() else str(k)
                 for k, i in enumerate(ids))


# ------------------------------------------------------------------ case info
RESERVED_NAMES = frozenset(INPUTS + PARAMS + ("eps", "torch", "F", "nn", "None", "True", "False"))


def _check_name(name, what):
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) \
            or name.startswith("__") or name.endswith("__"):
        raise ValueError(f"ProgramCase: {what} {name!r} is not a plain identifier")


@dataclass(frozen=True)
class ProgramCase:
    """What a program needs to know about its case (mapped from the spec by the caller).

    `extra_inputs` are the inputs after x (y and r, or any names the case
    declares), each of x's shape and dtype unless `input_types` gives its own
    (shape, dtype); `param_shapes` gives a parameter's shape (w, b, s default
    to [last dim of x]; any other name must be declared here). Parameters are
    in `weight_dtype`.
    """
    dtype: str
    shape: tuple[int, ...]
    weight_dtype: str | None = None  # None: = dtype
    extra_inputs: tuple[str, ...] = ()
    param_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    eps: float = TORCH_NORM_EPS
    input_types: Mapping[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)

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
        for name in extra:
            if name not in ("y", "r"):
                _check_name(name, "extra input")
                if name in RESERVED_NAMES:
                    raise ValueError(f"ProgramCase: extra input {name!r} is a reserved name")
        types = {}
        for name, (ishape, idtype) in dict(self.input_types).items():
            if name not in extra:
                raise ValueError(f"ProgramCase: input_types names {name!r}, not an extra input")
            if idtype not in DTYPES:
                raise ValueError(f"ProgramCase: input {name!r} dtype {idtype!r} is not one of {DTYPES}")
            types[name] = (tuple(int(n) for n in ishape), idtype)
        shapes = {n: (shape[-1],) for n in PARAMS}
        for name, value in dict(self.param_shapes).items():
            if name not in PARAMS:
                _check_name(name, "parameter")
                if name in RESERVED_NAMES or name in extra:
                    raise ValueError(f"ProgramCase: parameter {name!r} is a reserved or input name")
            shapes[name] = tuple(int(n) for n in value)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "weight_dtype", wdt)
        object.__setattr__(self, "extra_inputs", extra)
        object.__setattr__(self, "param_shapes", shapes)
        object.__setattr__(self, "eps", float(self.eps))
        object.__setattr__(self, "input_types", types)

    def __hash__(self):
        return hash((self.dtype, self.shape, self.weight_dtype, self.extra_inputs,
                     tuple(sorted(self.param_shapes.items())), self.eps, tuple(sorted(self.input_types.items()))))

    @property
    def inputs(self) -> tuple[str, ...]:
        return ("x",) + self.extra_inputs

    @property
    def params(self) -> tuple[str, ...]:
        """Every parameter a program of this case may read, in param_order."""
        return param_order(self.param_shapes)

    def input_type(self, name: str) -> tuple[tuple[int, ...], str]:
        """(shape, dtype) of input `name`."""
        return self.input_types.get(name, (self.shape, self.dtype))
