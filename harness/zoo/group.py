"""Norm classes grouped by implementation: the same code up to class names, docstrings and annotations.

A class's implementation is what methods.reached collects (constructor chain, forward, helpers,
module functions they call, inherited ones included), its torch bases and its class-level
statements. Each piece is normalized before comparing: docstrings and type annotations dropped, its
own class name replaced by a placeholder, a class of the corpus it builds replaced by that class's
own implementation key (two norms holding the same inner norm under different names agree), a
config class by a placeholder. Members of one implementation differ in nothing they compute.
"""
from __future__ import annotations

import ast
import copy
import hashlib
from dataclasses import dataclass

from harness.zoo.classes import ClassRef, ref_of
from harness.zoo.methods import reached

SELF = "__zoo_self__"
CONFIG = "__zoo_config__"


def _strip_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:] or [ast.Pass()]
    return body


class _Normalize(ast.NodeTransformer):
    def __init__(self, ref: ClassRef, module, key_of):
        self.ref, self.module, self.key_of = ref, module, key_of

    def visit_FunctionDef(self, node):
        node.body = _strip_docstring(node.body)
        node.returns = None
        for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
            a.annotation = None
        for a in (node.args.vararg, node.args.kwarg):
            if a is not None:
                a.annotation = None
        self.generic_visit(node)
        return node

    def visit_AnnAssign(self, node):
        if node.value is None:
            return None
        return self.visit(ast.Assign(targets=[node.target], value=node.value, lineno=0))

    def visit_Expr(self, node):  # a bare string in a body is a comment
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None
        return self.generic_visit(node)

    def visit_Name(self, node):
        node.id = self._rename(node.id)
        return node

    def _rename(self, name: str) -> str:
        if name == self.ref.name:
            return SELF
        dotted = self.module.resolve(name)
        other = ref_of(self.ref.corpus, dotted)
        if other is not None:
            return SELF if other.target == self.ref.target else self.key_of(other)
        if name.endswith("Config") and name[:1].isupper():
            return CONFIG
        return name


def _dump(ref: ClassRef, module, node: ast.AST, key_of) -> str:
    node = _Normalize(ref, module, key_of).visit(copy.deepcopy(node))
    return ast.dump(node, annotate_fields=False, include_attributes=False) if node is not None else ""


def _class_statements(ref: ClassRef) -> list[ast.stmt]:
    """Class-level statements that are not methods or docstrings, along the lineage."""
    out = []
    for r in ref.lineage:
        for stmt in _strip_docstring(list(r.node.body)):
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Pass)):
                out.append((r, stmt))
    return out


class Keys:
    """Implementation keys of one corpus (memoized: a norm's key may include the keys of norms it builds)."""

    def __init__(self):
        self._memo: dict[str, str] = {}
        self._busy: set[str] = set()

    def text(self, ref: ClassRef) -> str:
        """The normalized implementation of a class, as text (what is compared)."""
        parts = ["bases " + ",".join(sorted(b.name for b in ref.outer_bases))]
        for p in reached(ref):
            kind = "method" if ":" in p.owner else "function"
            parts.append(f"{kind} {p.node.name} {_dump(ref, p.module, p.node, self.key)}")
        for r, stmt in _class_statements(ref):
            parts.append(f"class {_dump(ref, r.module, stmt, self.key)}")
        head, rest = parts[0], sorted(parts[1:])
        return "\n".join([head] + rest)

    def key(self, ref: ClassRef) -> str:
        t = ref.target
        if t in self._memo:
            return self._memo[t]
        if t in self._busy:
            return "__zoo_cycle__"
        self._busy.add(t)
        try:
            k = "impl_" + hashlib.sha1(self.text(ref).encode()).hexdigest()[:12]
        finally:
            self._busy.discard(t)
        self._memo[t] = k
        return k


@dataclass(frozen=True)
class Implementation:
    key: str  # impl_<12 hex>: a hash of the normalized implementation
    representative: ClassRef
    members: tuple[ClassRef, ...]  # every class of the corpus that shares it, representative first


def representative_order(ref: ClassRef) -> tuple:
    """The original first: the class most modular files copy from, then hand-written files before
    generated ones, then by model folder and class name."""
    return (-ref.corpus.copied.get(ref.name, 0), ref.module.generated, ref.module.model, ref.name, ref.module.name)


def group(norms: list[ClassRef]) -> list[Implementation]:
    """The implementations of `norms`, ordered by representative; members ordered the same way."""
    keys = Keys()
    by_key: dict[str, list[ClassRef]] = {}
    for ref in norms:
        by_key.setdefault(keys.key(ref), []).append(ref)
    out = []
    for k, refs in by_key.items():
        refs = sorted(refs, key=representative_order)
        out.append(Implementation(k, refs[0], tuple(refs)))
    return sorted(out, key=lambda i: (i.representative.name.lower(), i.representative.module.name))
