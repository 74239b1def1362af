"""What a class runs, read from its source: the constructor chain, forward and everything forward reaches.

A class's *implementation* is its `__init__` (with the `super().__init__` chain through library
bases), its `forward` (its own or inherited), the helper methods those call on `self` or `super()`,
and the module-level functions of the corpus they call by name. torch's own methods end the walk: a
class that inherits torch.nn.LayerNorm's forward is named by that base instead.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from harness.zoo.classes import ClassRef
from harness.zoo.corpus import Module


@dataclass(frozen=True)
class Piece:
    """One function of an implementation: where it is defined and its node."""

    owner: str  # "module:Class" for a method, "module" for a module-level function
    module: Module
    node: ast.FunctionDef

    @property
    def label(self) -> str:
        return f"{self.owner.partition(':')[2] or self.owner}.{self.node.name}"


def _is_super_call(node: ast.AST) -> bool:
    """`super()` or `super(Cls, self)`."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _names_called(fn: ast.FunctionDef):
    """(kind, name) for each `self.NAME`, `super().NAME` and bare `NAME(` in a function body."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                yield "self", node.attr
            elif _is_super_call(node.value):
                yield "super", node.attr
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            yield "name", node.func.id


def reached(ref: ClassRef, roots: tuple[str, ...] = ("__init__", "forward")) -> list[Piece]:
    """Every function the class runs from `roots`, each once, in discovery order."""
    if roots in ref.memo:
        return ref.memo[roots]
    out: list[Piece] = []
    seen: set[tuple[str, str]] = set()
    work: list[tuple[ClassRef | None, Module, ast.FunctionDef]] = []
    for root in roots:
        found = ref.method(root)
        if found:
            work.append((found[0], found[0].module, found[1]))
    while work:
        owner, module, fn = work.pop(0)
        key = (owner.target if owner else module.name, fn.name)
        if key in seen:
            continue
        seen.add(key)
        out.append(Piece(owner.target if owner else module.name, module, fn))
        for kind, name in _names_called(fn):
            if kind == "self" and owner is not None:
                found = ref.method(name)
                if found:
                    work.append((found[0], found[0].module, found[1]))
            elif kind == "super" and owner is not None:
                found = ref.super_method(owner, name)
                if found:
                    work.append((found[0], found[0].module, found[1]))
            elif kind == "name" and name in module.functions:
                work.append((None, module, module.functions[name]))
    ref.memo[roots] = out
    return out


def init_pieces(ref: ClassRef) -> list[Piece]:
    """The constructor chain only (for what the class builds)."""
    return reached(ref, roots=("__init__",))


def forward_pieces(ref: ClassRef) -> list[Piece]:
    return reached(ref, roots=("forward",))


@dataclass(frozen=True)
class ConstructedClass:
    """A class the constructor calls: where it assigns the result (`self.X`, or None) and its dotted name."""

    attr: str | None
    dotted: str


def built_classes(pieces: list[Piece]) -> list[ConstructedClass]:
    """Each class-like call (a capitalised callee) in the pieces, resolved to a dotted name."""
    out: list[ConstructedClass] = []
    for p in pieces:
        for node in ast.walk(p.node):
            if isinstance(node, ast.Assign):
                targets = [t.attr for t in node.targets
                           if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"]
                for call in ast.walk(node.value):
                    b = _built(p.module, call, targets[0] if targets else None)
                    if b:
                        out.append(b)
            elif isinstance(node, ast.Expr):
                for call in ast.walk(node.value):
                    b = _built(p.module, call, None)
                    if b:
                        out.append(b)
    return out


def _built(module: Module, node: ast.AST, attr: str | None) -> ConstructedClass | None:
    if not isinstance(node, ast.Call) or _is_super_call(node):
        return None
    try:
        text = ast.unparse(node.func)
    except Exception:  # noqa: BLE001
        return None
    last = text.rpartition(".")[2]
    if not last[:1].isupper() or not all(part.isidentifier() for part in text.split(".")):
        return None
    return ConstructedClass(attr, module.resolve(text))


def self_attrs_read(pieces: list[Piece]) -> set[str]:
    out = set()
    for p in pieces:
        for node in ast.walk(p.node):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                out.add(node.attr)
    return out


def call_names(pieces: list[Piece]) -> set[str]:
    """The last name of every callee (`torch.rsqrt` -> rsqrt, `x.pow` -> pow, `F.layer_norm` -> layer_norm)."""
    out = set()
    for p in pieces:
        for node in ast.walk(p.node):
            if isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Attribute):
                    out.add(f.attr)
                elif isinstance(f, ast.Name):
                    out.add(f.id)
    return out
