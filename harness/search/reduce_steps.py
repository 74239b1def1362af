"""The one-step reductions of a program case, and how small a case is (`normdiff reduce`, docs/reduce.md).

Every step is a new program spec one edit away from the current one:

* fold an op: replace its result by one of its tensor operands of the same
  shape and dtype (a neighbour of the norm, a cast that changes nothing, a
  multiply by a weight of ones, an add of zeros, the norm itself);
* return an earlier value of the output's shape (drop the tail of the program);
* shrink the shape: a leading dim to 1 or to half (a smaller batch), the last
  dim (the norm axis) to half;
* parameters: `normal` or `fill` to `ones`, one constant of `fill` dropped;
* inputs: a simpler kind (constant, alternating, uniform, normal), a kind's
  default parameters, seed 0.

Steps are edits of the IR (harness/program/ir.py), rendered (harness/program/render.py) for
the candidate's spec, which parses and checks it like any program: a step
that breaks the program (a view of a literal size after a shrink) is a spec
error and no candidate. After an edit, an assignment of a bare name is
propagated and statements nothing reads are dropped, and so are the inputs and
parameters the program no longer reads. `size` orders cases (fewer ops
first); every candidate is smaller than its case, so a reduction ends.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from harness.program.typecheck import TensorType, TypeWalker, type_env
from harness.program.ir import (
    Assign, BinOp, Cast, Cat, DTypeOf, Linear, Name, Neg, Norm, Program, Reduce, Return, ShapeOf, ShapeOp, Unary,
    ones_value,
)
from harness.program.render import names_read, render_expr, render_program, render_statement
from harness.spec import CaseSpec, SpecError
from harness.spec.keys import INPUT_KINDS
from harness.spec.program_keys import program_case

OPS = (BinOp, Neg, Cast, Unary, Reduce, Norm, ShapeOp, Cat, Linear)  # the IR nodes that compute something
# Input kinds from the simplest: what a reduced case is read with (the fuzzer's simple kinds, ranked).
SIMPLE_KINDS = ("constant", "alternating", "uniform", "normal")


@dataclass(frozen=True)
class Candidate:
    """A one-step reduction: the spec, and what the step did (one line, for the step's message)."""
    spec: CaseSpec
    what: str


# ------------------------------------------------------------------ the IR
def _children(e):
    """(field, index, child) of each IR node under `e` (index None for a field that holds one node)."""
    if not dataclasses.is_dataclass(e):
        return
    for f in dataclasses.fields(e):
        value = getattr(e, f.name)
        if isinstance(value, tuple):
            for i, item in enumerate(value):
                if dataclasses.is_dataclass(item):
                    yield f.name, i, item
        elif dataclasses.is_dataclass(value):
            yield f.name, None, value


def _nodes(e, at=()):
    """(path, node) of `e` and every node under it, parents first."""
    yield at, e
    for name, i, child in _children(e):
        yield from _nodes(child, at + ((name, i),))


def _replace(e, at, new):
    """`e` with the node at path `at` replaced by `new`."""
    if not at:
        return new
    (name, i), rest = at[0], at[1:]
    value = getattr(e, name)
    if i is None:
        return dataclasses.replace(e, **{name: _replace(value, rest, new)})
    items = list(value)
    items[i] = _replace(items[i], rest, new)
    return dataclasses.replace(e, **{name: tuple(items)})


def _rename(e, old: str, new: str):
    """`e` reading `new` wherever it read `old` (a name, NAME.shape[K], NAME.dtype)."""
    if isinstance(e, Name):
        return Name(new) if e.id == old else e
    if isinstance(e, (ShapeOf, DTypeOf)):
        return dataclasses.replace(e, name=new) if e.name == old else e
    for name, i, child in list(_children(e)):
        e = _replace(e, ((name, i),), _rename(child, old, new))
    return e


def tidy(statements) -> tuple:
    """Statements with each `a = b` propagated into what follows, a returned last assignment returned as its
    value, and the assignments nothing reads dropped."""
    out = []
    renames: dict[str, str] = {}
    for s in statements:
        value = s.value
        for old, new in renames.items():
            value = _rename(value, old, new)
        if isinstance(s, Assign) and isinstance(value, Name):
            renames[s.name] = value.id
            continue
        out.append(dataclasses.replace(s, value=value))
    if len(out) > 1 and isinstance(out[-2], Assign) and out[-1].value == Name(out[-2].name):
        out[-2:] = [dataclasses.replace(out[-1], value=out[-2].value)]  # `n = …; return n` is `return …`
    live: set[str] = set()
    kept = []
    for s in reversed(out):
        if isinstance(s, Return) or s.name in live:
            kept.append(s)
            live |= names_read(s.value)
    return tuple(reversed(kept))


class _Types(TypeWalker):
    """The static check's walk, keeping each node's type (by identity: equal subtrees are distinct nodes)."""

    def __init__(self, env):
        super().__init__(env)
        self.types: dict[int, object] = {}

    def eval(self, node):
        value = super().eval(node)
        self.types[id(node)] = value
        return value


def _op_name(e) -> str:
    if isinstance(e, (BinOp, Unary, Reduce, ShapeOp)):
        return e.op
    if isinstance(e, Norm):
        return e.kind
    return {Neg: "neg", Cast: "cast", Cat: "cat", Linear: "linear"}[type(e)]


def _short(e) -> str:
    """An operand as a step's message names it: its text, or its op when that is long."""
    text = render_expr(e)
    return text if len(text) <= 24 else f"its {_op_name(e)}"


def program_of(spec: CaseSpec) -> Program:
    return spec.parsed_program


def _typed(spec: CaseSpec):
    program = program_of(spec)
    walker = _Types(type_env(program, program_case(spec)))
    walker.run(program)
    return program, walker.types


def count_ops(spec: CaseSpec) -> int:
    """The ops of a program case: its IR nodes that compute a tensor (Python-number arithmetic is not one)."""
    program, types = _typed(spec)
    return sum(1 for s in program.statements for _, n in _nodes(s.value)
               if isinstance(n, OPS) and isinstance(types.get(id(n)), TensorType))


# ---------------------------------------------------------------- the size
def _input_rank(obj: dict) -> int:
    kind = obj["kind"]
    rank = SIMPLE_KINDS.index(kind) if kind in SIMPLE_KINDS else len(SIMPLE_KINDS)
    return rank + sum(1 for k, v in obj.items() if k in INPUT_KINDS[kind] and v != INPUT_KINDS[kind][k])


def size(spec: CaseSpec) -> tuple:
    """How large a program case is, compared in order: ops, elements of its inputs, statements, how
    unusual its inputs are, its parameters, a seed other than 0, the length of its text."""
    elements = math.prod(spec.shape) + sum(math.prod(obj.get("shape") or spec.shape)
                                           for obj in spec.inputs_dict.values())
    params = spec.params_dict
    params_rank = {"ones": 0, "fill": 1, "normal": 2}[params["kind"]] + len(params.get("values", {}))
    inputs_rank = _input_rank(spec.input_dict) + sum(_input_rank(o) for o in spec.inputs_dict.values())
    return (count_ops(spec), elements, len(program_of(spec).statements), inputs_rank, params_rank,
            int(spec.seed != 0), len(spec.program))


# ------------------------------------------------------------- the steps
def with_program(spec: CaseSpec, statements) -> CaseSpec:
    """`spec` running `statements` (tidied), without the inputs and parameters they no longer read."""
    statements = tidy(statements)
    raw = spec.to_dict()
    raw["program"] = render_program(statements)
    read = set().union(*(names_read(s.value) for s in statements))
    if "inputs" in raw:
        raw["inputs"] = {n: o for n, o in raw["inputs"].items() if n in read}
        if not raw["inputs"]:
            del raw["inputs"]
    raw["param_shapes"] = {n: s for n, s in raw.get("param_shapes", {}).items() if n in read}
    if raw["params"]["kind"] == "fill":
        raw["params"]["values"] = {n: v for n, v in raw["params"]["values"].items() if n in read}
    return CaseSpec.from_dict(raw)


def _program_steps(spec: CaseSpec):
    """(what, statements) of every fold and every earlier return."""
    program, types = _typed(spec)
    statements = program.statements
    out = []
    for k, s in enumerate(statements):
        for at, node in _nodes(s.value):
            if not isinstance(node, OPS):
                continue
            own = types.get(id(node))
            if not isinstance(own, TensorType):
                continue
            seen = set()
            for _, _, child in _children(node):
                if types.get(id(child)) != own or child in seen:
                    continue
                seen.add(child)
                edited = dataclasses.replace(s, value=_replace(s.value, at, child))
                out.append((f"folded {_op_name(node)} in `{render_statement(s)}` into {_short(child)}",
                            statements[:k] + (edited,) + statements[k + 1:]))
    returned = types.get(id(statements[-1].value))
    if not isinstance(returned, TensorType):  # several outputs: each is kept, none returned in their place
        return out
    for k, s in enumerate(statements[:-1]):
        own = types.get(id(s.value))
        if isinstance(own, TensorType) and own.shape == returned.shape:
            out.append((f"returned {s.name} (dropped what follows `{render_statement(s)}`)",
                        statements[:k + 1] + (Return(Name(s.name), statements[-1].line),)))
    return out


def _resized(raw: dict, dim: int, old: int, new: int) -> dict:
    """`raw` with dim `dim` of x (and of every parameter and extra input shaped alike) from `old` to `new`."""
    raw = {**raw, "shape": list(raw["shape"])}
    raw["shape"][dim] = new
    rank = len(raw["shape"])
    pos = dim % rank

    def fit(shape):
        shape = list(shape)
        at = pos - (rank - len(shape))  # right-aligned, as broadcasting aligns them
        if 0 <= at < len(shape) and shape[at] == old:
            shape[at] = new
        return shape

    raw["param_shapes"] = {n: fit(s) for n, s in raw.get("param_shapes", {}).items()}
    if "inputs" in raw:
        raw["inputs"] = {n: ({**o, "shape": fit(o["shape"])} if "shape" in o else o) for n, o in raw["inputs"].items()}
    return raw


def _spec_steps(spec: CaseSpec):
    """(what, raw spec) of every shape, parameter and input simplification."""
    raw = spec.to_dict()
    shape = list(spec.shape)
    out = []
    for d, n in enumerate(shape):
        last = d == len(shape) - 1
        for m in sorted({n // 2} | (set() if last else {1})):
            if 1 <= m < n and (m >= 2 or not last):
                what = "the norm axis" if last else f"dim {d}"
                out.append((f"shrank {what} from {n} to {m}", _resized(raw, d, n, m)))
    params = spec.params_dict
    if params["kind"] != "ones" and spec.param_shapes:  # a program that reads no parameter draws none
        out.append((f"parameters {params['kind']} -> ones", {**raw, "params": {"kind": "ones"}}))
    for name, value in sorted(params.get("values", {}).items()):
        values = {k: v for k, v in params["values"].items() if k != name}
        out.append((f"parameter {name} = {value:g} -> {ones_value(name):g}",
                    {**raw, "params": {"kind": "fill", "values": values}}))
    objects = [("x", spec.input_dict, lambda r, o: {**r, "input": o})] if "x" in program_of(spec).reads else []
    for name, obj in spec.inputs_dict.items():
        objects.append((name, obj, lambda r, o, name=name: {**r, "inputs": {**r["inputs"], name: o}}))
    for name, obj, put in objects:
        keep = {k: obj[k] for k in ("shape", "dtype") if k in obj}
        for kind in SIMPLE_KINDS:
            simpler = {"kind": kind, **keep}
            if _input_rank(simpler) < _input_rank(obj):
                out.append((f"input {name}: {obj['kind']} -> {kind}", put(raw, simpler)))
    if spec.seed != 0:
        out.append(("seed -> 0", {**raw, "seed": 0}))
    return out


def candidates(spec: CaseSpec) -> list[Candidate]:
    """Every one-step reduction of a program case that is a valid spec and smaller, smallest first (ties in
    the order the steps are listed above), one per distinct spec."""
    made = []
    for what, statements in _program_steps(spec):
        try:
            made.append(Candidate(with_program(spec, statements), what))
        except SpecError:
            continue
    for what, raw in _spec_steps(spec):
        try:
            made.append(Candidate(CaseSpec.from_dict(raw), what))
        except SpecError:
            continue
    own = size(spec)
    ranked = []
    seen = {spec.case_id, with_program(spec, program_of(spec).statements).case_id}  # itself, re-rendered
    for i, c in enumerate(made):
        if c.spec.case_id in seen:
            continue
        seen.add(c.spec.case_id)
        key = size(c.spec)
        if key < own:
            ranked.append((key, i, c))
    ranked.sort(key=lambda t: t[:2])
    return [c for _, _, c in ranked]
