"""The statistics a program writes out as reductions, found in its IR, so its witnesses can form them by Welford.

A program that spells a variance out,

    mean = h.mean(-1, keepdim=True)
    var = ((h - mean) ** 2).mean(-1, keepdim=True)

computes what `h.var(-1, correction=0)` and F.layer_norm compute, and a
correct compiler may form it the same ways: Inductor matches exactly this
pattern into its Welford reduction, ATen's moments are Welford. The witnesses
(harness.program.witness_run) give `var` and the F.* norms their Welford
orders; this module gives the written-out forms the same spread, derived from
the IR and not written per pattern:

* a *centered* moment: a `mean` or `sum` over dims D of the square of
  `T - M`, where M is a `mean` over D of the same T with keepdim (the
  square written `d ** 2`, `d * d`, `d.pow(2)` or `d.square()`, through any
  names): its mean M and its sum of squared deviations come from one pass;
* an *uncentered* moment: a `mean` over D of the square of T (an RMS
  statistic), formed as a running mean of squares, as for F.rms_norm.

"The same T" means the same computation: names are read through (each read
of a name is the expression assigned to it before that read; value numbers
compare them without inlining the trees), so `h` and
`x.float()` match and a name assigned twice never confuses two values. A
moment is only formed in float32 (where T is float32; the walker checks its
dtype and dims at run time): a float32 Welford is no legitimate way to run a
statistic a program writes in float16.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from harness.program.ir import Assign, BinOp, Name, Program, Reduce, children, squared


@dataclass(frozen=True)
class Moment:
    """A statistic the program writes as reductions: `second` (as written) reduces the squares of T, less
    T's mean `mean` (the centering mean's value number: None for an uncentered mean of squares)."""

    second: Reduce
    mean: int | None = None

    @property
    def centered(self) -> bool:
        return self.mean is not None


@dataclass(frozen=True)
class Statistics:
    """A program's moments, looked up by the identity of the reduction nodes the walker meets."""

    moments: tuple[Moment, ...] = ()
    centering: tuple[tuple[Reduce, int], ...] = ()  # (a mean as written, its value number) of a moment

    def second(self, node) -> Moment | None:
        """The moment whose reduction of squares `node` (as written) is."""
        return next((m for m in self.moments if m.second is node), None)

    def mean(self, node) -> int | None:
        """The value number of the centering mean `node` (a mean as written) computes, if a moment centers on it."""
        return next((n for written, n in self.centering if written is node), None)


class _Values:
    """Value numbers of a program's expressions: two expressions get one number exactly when they compute the
    same thing with every name read as the expression assigned to it before (what inlining the names and
    comparing the trees would say, in time linear in the program: an inlined tree can grow exponentially,
    `a = a * a` doubling it at each line)."""

    def __init__(self):
        self.table: dict = {}

    def number(self, node, defs: dict) -> int:
        """`node`'s number, its names read through `defs` (name -> (expression, its defs, its number))."""
        if isinstance(node, Name) and node.id in defs:
            return defs[node.id][2]
        key = (type(node).__name__, *(self._part(getattr(node, f.name), defs) for f in dataclasses.fields(node)))
        return self.table.setdefault(key, len(self.table))

    def _part(self, value, defs: dict):
        if dataclasses.is_dataclass(value):
            return ("node", self.number(value, defs))
        if isinstance(value, tuple):
            return ("tuple", tuple(self._part(v, defs) for v in value))
        return ("value", repr(value))


def _resolve(node, defs: dict):
    """(the expression `node` reads, the defs it was written under): through names to what was assigned."""
    while isinstance(node, Name) and node.id in defs:
        node, defs = defs[node.id][0], defs[node.id][1]
    return node, defs


def _square_base(node, defs: dict, values: _Values):
    """(D, its defs) where node is D ** 2, D * D (the same D, by value number) or D.square(); else None."""
    node, defs = _resolve(node, defs)
    base = squared(node, lambda a, b: values.number(a, defs) == values.number(b, defs))
    return None if base is None else (base, defs)


def _reductions(node):
    """Every Reduce node in `node`'s tree."""
    if isinstance(node, Reduce):
        yield node
    for child in children(node):
        yield from _reductions(child)


def _centering(base, defs: dict, second: Reduce, values: _Values) -> int | None:
    """The number of M where `base` is T - M, M a keepdim mean over `second`'s dims of T itself."""
    base, defs = _resolve(base, defs)
    if not (isinstance(base, BinOp) and base.op == "sub"):
        return None
    mean, mean_defs = _resolve(base.right, defs)
    if (isinstance(mean, Reduce) and mean.op == "mean" and mean.keepdim and mean.correction is None
            and mean.dims == second.dims
            and values.number(mean.operand, mean_defs) == values.number(base.left, defs)):
        return values.number(mean, mean_defs)
    return None


_MEMO: dict[int, tuple[Program, Statistics]] = {}
MEMO_SIZE = 256  # programs whose statistics a process keeps (a witness walk per order asks each once)


def of(program: Program) -> Statistics:
    """The moments `program` writes out as reductions (none for a program that writes none), memoised by the
    program's identity: a Statistics names this program's very nodes."""
    hit = _MEMO.get(id(program))
    if hit is not None and hit[0] is program:
        return hit[1]
    if len(_MEMO) >= MEMO_SIZE:
        _MEMO.clear()
    stats = _find(program)
    _MEMO[id(program)] = (program, stats)
    return stats


def _find(program: Program) -> Statistics:
    values, defs = _Values(), {}
    moments, means = [], []
    for stmt in program.statements:
        for node in _reductions(stmt.value):
            means.append((node, values.number(node, defs)))
            if node.op not in ("mean", "sum") or node.correction is not None:
                continue
            base = _square_base(node.operand, defs, values)
            if base is None:
                continue
            mean = _centering(*base, node, values)
            if mean is not None:
                moments.append(Moment(node, mean))
            elif node.op == "mean":
                moments.append(Moment(node))
        if isinstance(stmt, Assign):
            defs = {**defs, stmt.name: (stmt.value, defs, values.number(stmt.value, defs))}
    centers = {m.mean for m in moments if m.mean is not None}
    return Statistics(tuple(moments), tuple((written, n) for written, n in means if n in centers))
