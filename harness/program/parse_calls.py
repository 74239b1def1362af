"""The calls of the program language: methods, torch.* and F.* functions, and their arguments.

A mixin of the parser (parse.py): each call is matched against the op table's
spellings (grammar.py) and its arguments bound as Python would bind them,
then checked for the kinds the language allows (int literals for dims,
NAME.shape[K] for sizes, True/False for keepdim, …).
"""
from __future__ import annotations

import ast

from harness.program import grammar as g
from harness.program import ops
from harness.program.ir import BinOp, Call, Cast, Cat, DType, DTypeOf, Linear, Norm, Number, Reduce, ShapeOp, Unary


def dotted_name(node) -> str | None:
    """'a.b.c' for a chain of attributes over a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class CallParser:
    """Calls and their arguments; the parser supplies fail, expr, read, shape_of and int_literal."""

    def call(self, node: ast.Call):
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                self.fail("starred argument is not allowed", arg)
        for kw in node.keywords:
            if kw.arg is None:
                self.fail("'**' argument is not allowed", kw.value)
        func = node.func
        dotted = dotted_name(func)
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
        if name in g.CALL:
            return self.call_op(name, node, receiver)
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
                if dotted_name(args["memory_format"]) != g.CONTIGUOUS:
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
        if name in g.CALL:
            return self.call_op(name, node, label=label)
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
        if name in g.CALL:
            return self.call_op(name, node, label=label)
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
        if name == "cat":
            return self.cat(node, label)
        if not node.args:
            self.fail(f"missing argument 'input' for {label}", node)
        receiver = self.expr(node.args[0])
        return self.reduction(name, receiver, node, skip=1, label=label)

    def call_op(self, name, node, receiver=None, label=None):
        """An op of the table's "call" rows: its operands (tensor expressions), then its options (constants of
        the kinds the op table gives), bound as Python binds them; every option kept, defaults filled in."""
        op = ops.get(name)
        label = label or name
        operands = op.signature[1:] if receiver is not None else op.signature
        names = operands + tuple(o.name for o in op.options)
        required = operands + tuple(o.name for o in op.options if o.required)
        args = self.bind(label, node, names, names, required)
        tensors = ((receiver,) if receiver is not None else ()) + tuple(self.expr(args[n]) for n in operands)
        options = tuple((o.name, self.option_arg(o, args[o.name], label) if o.name in args else o.default)
                        for o in op.options)
        return Call(name, tensors, options)

    def option_arg(self, option, node, label):
        """One option's value: the constant its kind allows (None where its default is None)."""
        what = f"{label}: {option.name}"
        if isinstance(node, ast.Constant) and node.value is None and option.default is None:
            return None
        if option.kind == "dim":
            k = self.int_literal(node)
            if k is None:
                self.fail(f"{what} must be an int literal", node)
            return k
        if option.kind in ("ints", "numbers", "number"):
            items = node.elts if isinstance(node, (ast.Tuple, ast.List)) and option.kind != "number" else None
            values = [self.option_number(e, option.kind == "ints", what) for e in (items or [node])]
            if items is not None:
                if not values:
                    self.fail(f"{what} must not be empty", node)
                return tuple(values)
            return values[0]
        if isinstance(node, ast.Constant):
            v = node.value
            if option.kind == "bool" and isinstance(v, bool):
                return v
            if option.kind == "choice" and any(v == c and type(v) is type(c) for c in option.choices):
                return v
        shown = " or ".join(repr(c) for c in option.choices) if option.kind == "choice" else "True or False"
        self.fail(f"{what} must be {shown}", node)

    def option_number(self, node, integer: bool, what):
        k = self.int_literal(node)
        if k is not None:
            return k if integer else float(k)
        if not integer:
            negative = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
            inner = node.operand if negative else node
            if isinstance(inner, ast.Constant) and type(inner.value) is float:
                return -inner.value if negative else inner.value
        self.fail(f"{what} must be {'an int literal' if integer else 'a number literal'} (or a tuple of them)", node)

    def cat(self, node, label):
        """torch.cat([a, b, …], dim=K): a non-empty list or tuple of tensor expressions, an int literal dim."""
        args = self.bind(label, node, ("tensors", "dim"), ("dim",), ("tensors",))
        items = args["tensors"]
        if not isinstance(items, (ast.List, ast.Tuple)) or not items.elts:
            self.fail(f"{label}: tensors must be a non-empty list or tuple of tensors", items)
        dim = 0
        if "dim" in args:
            dim = self.int_literal(args["dim"])
            if dim is None:
                self.fail(f"{label}: dim must be an int literal", args["dim"])
        return Cat(tuple(self.expr(e) for e in items.elts), dim)

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
        dotted = dotted_name(node)
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
