"""Norm program text -> IR, by walking Python's AST (never exec/eval/compile).

Everything not listed in docs/contracts.md §7 is rejected with a one-line ProgramError
naming the construct and its line. A whitelist, not a blacklist: each AST
node type is accepted only where the language allows it, so nothing the
user writes can reach an interpreter.
"""
from __future__ import annotations

import ast
import functools
import textwrap
from collections import Counter

from harness.program import grammar as g
from harness.program.parse_calls import CallParser, dotted_name
from harness.program.ir import (
    PARAMS,
    Assign,
    BinOp,
    Call,
    IndexSlice,
    Name,
    Neg,
    Number,
    Outputs,
    Program,
    ProgramError,
    Return,
    ShapeOf,
    ShapeOp,
    param_order,
)


def normalise_source(source: str) -> str:
    """Strip trailing whitespace per line, surrounding blank lines, common indentation."""
    lines = [line.rstrip() for line in source.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return textwrap.dedent("\n".join(lines))


PARSE_MEMO = 1024  # distinct (text, inputs, params) a process keeps parsed: more than a nightly shard's programs

PARSES: Counter[str] = Counter()
"""How many times this process parsed each program text (its normalised source): each is parsed once,
as tests/program/test_parse_once.py checks over the nightly suite."""


def parse(source: str, *, inputs=("x",), params=PARAMS, case=None) -> Program:
    """Parse and check a program; with `case` (a ProgramCase) also check shapes and dtypes.

    A text is parsed once per process (the result is frozen, and kept for
    the next case of the same text: the catalog styles' few programs serve
    every catalog case); `case` is checked each time, since what it says of
    shapes and dtypes differs between the cases of one text. A program case
    carries its Program on its spec (CaseSpec.parsed_program), and a lifted
    program is built as IR, so no consumer parses text again.
    """
    if case is not None:
        inputs, params = case.inputs, case.params
    if not isinstance(source, str):
        raise ProgramError(f"program: must be a string, got {type(source).__name__}")
    program = _parse(source, tuple(inputs), tuple(params))
    if case is not None:
        from harness.program.typecheck import check
        check(program, case)
    return program


@functools.lru_cache(maxsize=PARSE_MEMO)
def _parse(source: str, inputs: tuple, params: tuple) -> Program:
    if len(source) > g.MAX_SOURCE:
        raise ProgramError(f"program: longer than {g.MAX_SOURCE} characters")
    text = normalise_source(source)
    PARSES[text] += 1
    try:
        tree = ast.parse(text, mode="exec")
        return _Parser(text, inputs, params).program(tree)
    except SyntaxError as e:
        raise ProgramError(f"program line {e.lineno or 1}: syntax error: {e.msg}") from None
    except (RecursionError, MemoryError):
        raise ProgramError("program: too deeply nested") from None
    except ValueError as e:
        if isinstance(e, ProgramError):
            raise
        raise ProgramError(f"program: {str(e).splitlines()[0] if str(e) else 'unreadable'}") from None


def _dunder(text: str) -> bool:
    return text.startswith("__") or text.endswith("__")


class _Parser(CallParser):
    def __init__(self, text, inputs, params):
        self.text = text
        self.available = set(inputs) | set(params) | {"eps"}
        self.inputs = ("x",) + tuple(sorted(n for n in inputs if n != "x"))
        self.params = param_order(params)
        self.assigned: set[str] = set()
        self.later: set[str] = set()
        self.reads: set[str] = set()
        self.line = 1
        self.depth = 0

    def fail(self, what: str, node=None):
        line = getattr(node, "lineno", None) or self.line
        raise ProgramError(f"program line {line}: {what}")

    # ------------------------------------------------------------ statements
    def program(self, tree: ast.Module) -> Program:
        self._reject_dunders(tree)
        self.later = {t.id for s in tree.body if isinstance(s, ast.Assign)
                      for t in s.targets if isinstance(t, ast.Name)}
        statements, previous_end, returned = [], 0, False
        for stmt in tree.body:
            self.line = stmt.lineno
            if stmt.lineno <= previous_end:
                self.fail("more than one statement on a line", stmt)
            previous_end = stmt.end_lineno or stmt.lineno
            if returned:
                self.fail("a second return" if isinstance(stmt, ast.Return) else "statement after the return", stmt)
            if isinstance(stmt, ast.Assign):
                statements.append(self.assign(stmt))
            elif isinstance(stmt, ast.Return):
                if stmt.value is None:
                    self.fail("return without a value", stmt)
                statements.append(Return(self.returned(stmt.value), stmt.lineno))
                returned = True
            else:
                label = g.STATEMENTS.get(type(stmt).__name__, type(stmt).__name__.lower())
                self.fail(f"{label} is not allowed", stmt)
        if not returned:
            raise ProgramError("program: no return")
        reads = tuple(n for n in self.inputs + self.params + ("eps",) if n in self.reads)
        return Program(self.text, tuple(statements), reads, self.inputs, self.params)

    def returned(self, node):
        """A return's value: one expression, or a tuple of them (`return y, r`: several outputs)."""
        if not isinstance(node, ast.Tuple):
            return self.expr(node)
        if len(node.elts) < 2:
            self.fail("a return of fewer than two values is not a tuple of outputs", node)
        if len(node.elts) > g.MAX_OUTPUTS:
            self.fail(f"a return of more than {g.MAX_OUTPUTS} outputs", node)
        if any(isinstance(e, ast.Starred) for e in node.elts):
            self.fail("a starred return value is not allowed", node)
        return Outputs(tuple(self.expr(e) for e in node.elts))

    def _reject_dunders(self, tree):
        """Any dunder name or attribute anywhere, first by position: the usual escape routes."""
        bad = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and _dunder(node.id):
                bad.append((node.lineno, node.col_offset, f"name {node.id!r} is not allowed"))
            elif isinstance(node, ast.Attribute) and _dunder(node.attr):
                bad.append((node.lineno, node.col_offset, f"attribute {node.attr!r} is not allowed"))
            elif isinstance(node, ast.keyword) and node.arg and _dunder(node.arg):
                bad.append((node.lineno, node.col_offset, f"keyword {node.arg!r} is not allowed"))
        if bad:
            line, _, what = min(bad)
            raise ProgramError(f"program line {line}: {what}")

    def assign(self, stmt: ast.Assign) -> Assign:
        if len(stmt.targets) != 1:
            self.fail("chained assignment is not allowed", stmt)
        target = stmt.targets[0]
        if not isinstance(target, ast.Name):
            kind = {"Tuple": "a tuple", "List": "a list", "Attribute": "an attribute",
                    "Subscript": "a subscript", "Starred": "a starred name"}.get(type(target).__name__, "that")
            self.fail(f"assignment to {kind} is not allowed", stmt)
        if target.id in g.RESERVED:
            self.fail(f"assignment to reserved name {target.id!r} is not allowed", stmt)
        value = self.expr(stmt.value)
        self.assigned.add(target.id)
        return Assign(target.id, value, stmt.lineno)

    # ----------------------------------------------------------- expressions
    def expr(self, node):
        self.depth += 1
        try:
            if self.depth > g.MAX_DEPTH:
                self.fail(f"expression nested deeper than {g.MAX_DEPTH}", node)
            return self._expr(node)
        finally:
            self.depth -= 1

    def _expr(self, node):
        if isinstance(node, ast.Constant):
            return Number(self.number(node))
        if isinstance(node, ast.Name):
            return self.read(node)
        if isinstance(node, ast.BinOp):
            if type(node.op) in g.CALL_OPERATORS:
                return Call(g.CALL_OPERATORS[type(node.op)], (self.expr(node.left), self.expr(node.right)))
            op = g.BINOPS.get(type(node.op)) or g.INT_OPERATORS.get(type(node.op))
            if op is None:
                self.fail(f"operator {g.OPERATOR_TEXT.get(type(node.op), '?')!r} is not allowed", node)
            return BinOp(op, self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.UAdd):
                return self.expr(node.operand)
            if isinstance(node.op, ast.USub):
                operand = self.expr(node.operand)
                if isinstance(operand, Number):
                    return Number(-operand.value)
                return Neg(operand)
            self.fail(f"operator {g.OPERATOR_TEXT.get(type(node.op), '?')!r} is not allowed", node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Subscript):
            base = node.value
            if isinstance(base, ast.Attribute) and base.attr == "shape" and isinstance(base.value, ast.Name):
                return self.shape_of(node)
            return self.index(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        label = g.EXPRESSIONS.get(type(node).__name__, type(node).__name__.lower())
        self.fail(f"{label} is not allowed here" if label in ("tuple", "list") else f"{label} is not allowed", node)

    def number(self, node: ast.Constant):
        value = node.value
        if isinstance(value, bool) or value is None:
            self.fail(f"{value!r} is not allowed here", node)
        if isinstance(value, (int, float)):
            return value
        kind = {complex: "complex number", str: "string", bytes: "bytes"}.get(type(value), repr(value))
        self.fail(f"{kind} is not allowed", node)

    def read(self, node: ast.Name) -> Name:
        name = node.id
        if name in self.assigned:
            return Name(name)
        if name in ("torch", "F", "nn"):
            self.fail(f"name {name!r} is allowed only in torch.… calls and dtypes", node)
        if name in self.available:
            self.reads.add(name)
            return Name(name)
        if name in ("y", "r"):
            self.fail(f"name {name!r} is not available: the case has no extra input {name!r}", node)
        if name in PARAMS:
            self.fail(f"name {name!r} is not available: the case has no parameter {name!r}", node)
        if name in self.later:
            self.fail(f"name {name!r} is read before it is assigned", node)
        self.fail(f"name {name!r} is not allowed", node)

    def attribute(self, node: ast.Attribute):
        dotted = dotted_name(node)
        if dotted in g.DTYPE_ATTRS or (isinstance(node.value, ast.Name) and node.attr == "dtype"):
            self.fail(f"{dotted!r} is allowed only as the dtype argument of .to()", node)
        if dotted == g.CONTIGUOUS:
            self.fail(f"{dotted!r} is allowed only as memory_format= of .to()", node)
        if isinstance(node.value, ast.Name) and node.attr == "shape":
            self.fail(f"{dotted!r} is allowed only as {dotted}[K]", node)
        self.fail(f"attribute {dotted or '.' + node.attr!r} is not allowed", node)

    def shape_of(self, node: ast.Subscript) -> ShapeOf:
        base = node.value
        if not (isinstance(base, ast.Attribute) and base.attr == "shape" and isinstance(base.value, ast.Name)):
            self.fail("subscript is not allowed (only NAME.shape[K])", node)
        name = self.read(base.value).id
        index = node.slice
        k = self.int_literal(index)
        if k is None:
            self.fail(f"index of {name}.shape must be an int literal", node)
        return ShapeOf(name, k)

    def index(self, node: ast.Subscript) -> ShapeOp:
        """t[:, None, None], t[..., None], t[..., :d // 2]: slices without a step, None and one Ellipsis (a view,
        exact); a slice's bounds are int expressions (numbers, NAME.shape[K] and arithmetic on them)."""
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        items = []
        for e in elts:
            if isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None:
                items.append(":")
            elif isinstance(e, ast.Slice) and e.step is None:
                items.append(IndexSlice(None if e.lower is None else self.expr(e.lower),
                                        None if e.upper is None else self.expr(e.upper)))
            elif isinstance(e, ast.Constant) and e.value is None:
                items.append("None")
            elif isinstance(e, ast.Constant) and e.value is Ellipsis:
                items.append("...")
            else:
                self.fail("subscript is not allowed (only NAME.shape[K], or an index of slices without a step, None "
                          "and '...')", node)
        return ShapeOp("index", self.expr(node.value), tuple(items))

    def int_literal(self, node) -> int | None:
        negative = False
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            negative = isinstance(node.op, ast.USub)
            node = node.operand
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return -node.value if negative else node.value
        return None
