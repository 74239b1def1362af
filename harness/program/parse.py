"""Norm program text -> IR, by walking Python's AST (never exec/eval/compile).

Everything not listed in DESIGN §7 is rejected with a one-line ProgramError
naming the construct and its line. A whitelist, not a blacklist: each AST
node type is accepted only where the language allows it, so nothing the
user writes can reach an interpreter.
"""
from __future__ import annotations

import ast
import functools
import textwrap

from harness.program import grammar as g
from harness.program import ops
from harness.program.ir import (
    PARAMS,
    Assign,
    BinOp,
    Cast,
    DType,
    DTypeOf,
    Linear,
    Name,
    Neg,
    Norm,
    Number,
    Program,
    ProgramError,
    Reduce,
    Return,
    ShapeOf,
    ShapeOp,
    Unary,
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


def parse(source: str, *, inputs=("x",), params=PARAMS, case=None) -> Program:
    """Parse and check a program; with `case` (a ProgramCase) also check shapes and dtypes.

    The result is memoised (a Program is frozen): the spec, the reference, the
    torch module and attribution all ask for the same program of one case,
    which is then parsed once per process.
    """
    if case is not None:
        inputs, params = case.inputs, case.params
    if not isinstance(source, str):
        raise ProgramError(f"program: must be a string, got {type(source).__name__}")
    return _parse(source, tuple(inputs), tuple(params), case)


@functools.lru_cache(maxsize=256)
def _parse(source: str, inputs: tuple, params: tuple, case) -> Program:
    if len(source) > g.MAX_SOURCE:
        raise ProgramError(f"program: longer than {g.MAX_SOURCE} characters")
    text = normalise_source(source)
    try:
        tree = ast.parse(text, mode="exec")
        program = _Parser(text, inputs, params).program(tree)
    except SyntaxError as e:
        raise ProgramError(f"program line {e.lineno or 1}: syntax error: {e.msg}") from None
    except (RecursionError, MemoryError):
        raise ProgramError("program: too deeply nested") from None
    except ValueError as e:
        if isinstance(e, ProgramError):
            raise
        raise ProgramError(f"program: {str(e).splitlines()[0] if str(e) else 'unreadable'}") from None
    if case is not None:
        from harness.program.check import check
        check(program, case)
    return program


def _dotted(node) -> str | None:
    """'a.b.c' for a chain of attributes over a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _dunder(text: str) -> bool:
    return text.startswith("__") or text.endswith("__")


class _Parser:
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
                statements.append(Return(self.expr(stmt.value), stmt.lineno))
                returned = True
            else:
                label = g.STATEMENTS.get(type(stmt).__name__, type(stmt).__name__.lower())
                self.fail(f"{label} is not allowed", stmt)
        if not returned:
            raise ProgramError("program: no return")
        reads = tuple(n for n in self.inputs + self.params + ("eps",) if n in self.reads)
        return Program(self.text, tuple(statements), reads, self.inputs, self.params)

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
            op = g.BINOPS.get(type(node.op))
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
        dotted = _dotted(node)
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
        """t[:, None, None], t[..., None]: only full slices, None and one Ellipsis (a view, exact)."""
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        items = []
        for e in elts:
            if isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None:
                items.append(":")
            elif isinstance(e, ast.Constant) and e.value is None:
                items.append("None")
            elif isinstance(e, ast.Constant) and e.value is Ellipsis:
                items.append("...")
            else:
                self.fail("subscript is not allowed (only NAME.shape[K], or an index of ':', None and '...')", node)
        return ShapeOp("index", self.expr(node.value), tuple(items))

    def int_literal(self, node) -> int | None:
        negative = False
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            negative = isinstance(node.op, ast.USub)
            node = node.operand
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return -node.value if negative else node.value
        return None

    # ----------------------------------------------------------------- calls
    def call(self, node: ast.Call):
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                self.fail("starred argument is not allowed", arg)
        for kw in node.keywords:
            if kw.arg is None:
                self.fail("'**' argument is not allowed", kw.value)
        func = node.func
        dotted = _dotted(func)
        if dotted is not None:
            for prefix in ("torch.nn.functional.", "F."):
                if dotted.startswith(prefix):
                    rest = dotted[len(prefix):]
                    if rest not in g.FUNCTIONAL:
                        self.fail(f"call of {dotted!r} is not allowed", node)
                    return self.functional(g.FUNCTIONAL[rest], node)
            if dotted.startswith("torch."):
                rest = dotted[len("torch."):]
                if rest not in g.FUNCTIONS:
                    self.fail(f"call of {dotted!r} is not allowed", node)
                return self.function(g.FUNCTIONS[rest], node)
        if isinstance(func, ast.Attribute):
            if func.attr not in g.METHODS:
                self.fail(f"call of {dotted or '.' + func.attr!r} is not allowed", node)
            return self.method(func.attr, self.expr(func.value), node)
        if isinstance(func, ast.Name):
            self.fail(f"call of {func.id!r} is not allowed", node)
        self.fail("call of an expression is not allowed", node)

    def bind(self, label, node, positional, keywords=(), required=()):
        """Map a call's arguments onto parameter names as Python would."""
        if len(node.args) > len(positional):
            self.fail(f"too many positional arguments for {label}", node)
        bound = dict(zip(positional, node.args))
        allowed = set(keywords)
        for kw in node.keywords:
            if kw.arg not in allowed:
                self.fail(f"keyword {kw.arg!r} is not allowed for {label}", kw.value)
            if kw.arg in bound:
                self.fail(f"argument {kw.arg!r} given twice for {label}", kw.value)
            bound[kw.arg] = kw.value
        for name in required:
            if name not in bound:
                self.fail(f"missing argument {name!r} for {label}", node)
        return bound

    def method(self, name, receiver, node):
        if name in g.SHAPE:
            return self.shape_op(name, receiver, node)
        if name in g.CASTS or name in g.UNARY:
            self.bind(name, node, ())
            if name in g.CASTS:
                return Cast(receiver, name, DType(g.CASTS[name]))
            return Unary(name, receiver)
        if name == "to":
            args = self.bind("to", node, ("dtype",), ("dtype", "memory_format"), ("dtype",))
            contiguous = False
            if "memory_format" in args:
                if _dotted(args["memory_format"]) != g.CONTIGUOUS:
                    self.fail(f"memory_format must be {g.CONTIGUOUS}", args["memory_format"])
                contiguous = True
            return Cast(receiver, "to", self.dtype_arg(args["dtype"]), contiguous=contiguous)
        if name == "type_as":
            args = self.bind("type_as", node, ("other",), (), ("other",))
            return Cast(receiver, "type_as", like=self.expr(args["other"]))
        if name == "pow":
            args = self.bind("pow", node, ("exponent",), ("exponent",), ("exponent",))
            return BinOp("pow", receiver, self.expr(args["exponent"]))
        return self.reduction(name, receiver, node)

    def functional(self, name, node):
        """A torch.nn.functional call: an F.* norm, F.linear, or an elementwise op (F.silu)."""
        if name in g.NORM_SIGNATURES:
            return self.norm(name, node)
        label = f"F.{name}"
        if name == "linear":
            args = self.bind(label, node, ("input", "weight", "bias"), ("weight", "bias"), ("input", "weight"))
            bias = self.optional(args["bias"]) if "bias" in args else None
            return Linear(self.expr(args["input"]), self.expr(args["weight"]), bias)
        args = self.bind(label, node, ("input",), (), ("input",))
        return Unary(name, self.expr(args["input"]))

    def shape_op(self, name, receiver, node, skip=0, label=None):
        """A shape op's int arguments: one per dim, or (for sizes) one tuple/list of them."""
        label = label or name
        for kw in node.keywords:
            if not (name == "squeeze" and kw.arg == "dim") and not (name == "narrow" and kw.arg in
                                                                    ("dim", "start", "length")):
                self.fail(f"keyword {kw.arg!r} is not allowed for {label}", kw.value)
        raw = list(node.args[skip:]) + [kw.value for kw in node.keywords]
        if name in ops.SIZES and len(raw) == 1 and isinstance(raw[0], (ast.Tuple, ast.List)):
            raw = list(raw[0].elts)
        if name == "squeeze" and len(raw) == 1 and isinstance(raw[0], (ast.Tuple, ast.List)):
            raw = list(raw[0].elts)
        arity = {"unsqueeze": (1, 1), "squeeze": (0, 8), "transpose": (2, 2), "narrow": (3, 3),
                 "contiguous": (0, 0)}.get(name, (1, 8))
        if not arity[0] <= len(raw) <= arity[1]:
            want = arity[0] if arity[0] == arity[1] else f"{arity[0]} to {arity[1]}"
            self.fail(f"{label} takes {want} int argument(s), got {len(raw)}", node)
        return ShapeOp(name, receiver, tuple(self.size_arg(a, label) for a in raw))

    def size_arg(self, node, label):
        """An int argument of a shape op: a number, NAME.shape[K], or arithmetic on them (checked as ints)."""
        if isinstance(node, (ast.Tuple, ast.List, ast.Starred)):
            self.fail(f"{label}: each argument must be an int expression", node)
        return self.expr(node)

    def function(self, name, node):
        label = f"torch.{name}"
        if name in g.SHAPE:
            if not node.args:
                self.fail(f"missing argument 'input' for {label}", node)
            return self.shape_op(name, self.expr(node.args[0]), node, skip=1, label=label)
        if name in g.UNARY:
            args = self.bind(label, node, ("input",), (), ("input",))
            return Unary(name, self.expr(args["input"]))
        if name == "pow":
            args = self.bind(label, node, ("input", "exponent"), ("exponent",), ("input", "exponent"))
            return BinOp("pow", self.expr(args["input"]), self.expr(args["exponent"]))
        if not node.args:
            self.fail(f"missing argument 'input' for {label}", node)
        receiver = self.expr(node.args[0])
        return self.reduction(name, receiver, node, skip=1, label=label)

    def reduction(self, name, receiver, node, skip=0, label=None):
        label = label or name
        sub = ast.Call(func=node.func, args=node.args[skip:], keywords=node.keywords)
        ast.copy_location(sub, node)
        if name == "var":  # a second positional is torch's `unbiased`: keyword-only here
            args = self.bind(label, sub, ("dim",), ("dim", "keepdim", "correction"))
        else:
            args = self.bind(label, sub, ("dim", "keepdim"), ("dim", "keepdim"))
        dims = self.dims_arg(args["dim"]) if "dim" in args else None
        keepdim = self.bool_arg(args["keepdim"], "keepdim") if "keepdim" in args else False
        correction = None
        if "correction" in args:
            correction = self.number_arg(args["correction"], "correction")
        return Reduce(name, receiver, dims, keepdim, correction)

    def norm(self, kind, node):
        names = g.NORM_SIGNATURES[kind]
        args = self.bind(kind, node, names, names[1:], names[:2])
        operand = self.expr(args["input"])
        shape = groups = weight = bias = eps = None
        if kind == "group_norm":
            groups = self.groups_arg(args["num_groups"])
        else:
            shape = self.shape_arg(args["normalized_shape"])
        if "weight" in args:
            weight = self.optional(args["weight"])
        if "bias" in args:
            bias = self.optional(args["bias"])
        if "eps" in args:
            eps = self.optional(args["eps"]) if kind == "rms_norm" else self.expr(args["eps"])
        return Norm(kind, operand, shape, groups, weight, bias, eps)

    # --------------------------------------------------------- argument kinds
    def optional(self, node):
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        return self.expr(node)

    def dtype_arg(self, node):
        dotted = _dotted(node)
        if dotted in g.DTYPE_ATTRS:
            return DType(g.DTYPE_ATTRS[dotted])
        if isinstance(node, ast.Attribute) and node.attr == "dtype" and isinstance(node.value, ast.Name):
            return DTypeOf(self.read(node.value).id)
        self.fail("the dtype of .to() must be torch.float32, torch.float16, torch.bfloat16 or NAME.dtype", node)

    def dims_arg(self, node):
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        k = self.int_literal(node)
        if k is not None:
            return (k,)
        if isinstance(node, (ast.Tuple, ast.List)) and node.elts:
            dims = [self.int_literal(e) for e in node.elts]
            if all(d is not None for d in dims):
                return tuple(dims)
        self.fail("dim must be an int literal or a non-empty list/tuple of int literals", node)

    def bool_arg(self, node, what):
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return node.value
        self.fail(f"{what} must be True or False", node)

    def number_arg(self, node, what):
        k = self.int_literal(node)
        if k is not None:
            return k
        value = self.expr(node)
        if isinstance(value, Number):
            return value.value
        self.fail(f"{what} must be a number literal", node)

    def shape_arg(self, node):
        if isinstance(node, (ast.Tuple, ast.List)) and node.elts:
            items = []
            for e in node.elts:
                k = self.int_literal(e)
                if k is not None:
                    items.append(Number(k))
                elif isinstance(e, ast.Subscript):
                    items.append(self.shape_of(e))
                else:
                    self.fail("normalized_shape must list int literals or NAME.shape[K]", e)
            return tuple(items)
        self.fail("normalized_shape must be a non-empty tuple/list of ints or NAME.shape[K]", node)

    def groups_arg(self, node):
        k = self.int_literal(node)
        if k is not None:
            return Number(k)
        if isinstance(node, ast.Subscript):
            return self.shape_of(node)
        self.fail("num_groups must be an int literal or NAME.shape[K]", node)
