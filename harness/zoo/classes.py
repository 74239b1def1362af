"""A class of the corpus with its bases followed: library bases through the corpus, torch bases by name.

Nothing is imported: a base is a dotted name resolved through the module's imports; it is either a
class of the corpus (followed), a torch module class (named, e.g. `torch.nn.LayerNorm`), or
something else (a layer or model base of the library, kept by name).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property

from harness.zoo.corpus import Corpus, Module

# torch's norm modules, by class name, with the family they compute (docs/contracts.md §1 patterns)
TORCH_NORMS = {
    "LayerNorm": "layer_norm", "RMSNorm": "rms_norm", "GroupNorm": "group_norm",
    "BatchNorm1d": "batch_norm", "BatchNorm2d": "batch_norm", "BatchNorm3d": "batch_norm",
    "SyncBatchNorm": "batch_norm", "InstanceNorm1d": "instance_norm", "InstanceNorm2d": "instance_norm",
    "InstanceNorm3d": "instance_norm", "LocalResponseNorm": "local_response_norm",
}
TORCH_MODULE = "torch.nn.Module"


def torch_class(dotted: str) -> str | None:
    """`torch.nn.X` for a dotted name that is a torch.nn class (`torch.nn.modules.normalization.LayerNorm`)."""
    if not dotted.startswith("torch.nn.") and dotted != "torch.nn":
        return None
    last = dotted.rpartition(".")[2]
    return f"torch.nn.{last}" if last[:1].isupper() else None


@dataclass(frozen=True)
class Base:
    kind: str  # "lib" (a class of the corpus), "torch" (a torch.nn class), "other"
    name: str  # dotted


class ClassRef:
    """One class of the corpus and what its bases resolve to (one instance per class: `ref_of`)."""

    def __init__(self, corpus: Corpus, module: Module, name: str):
        self.corpus, self.module, self.name = corpus, module, name
        self.memo: dict = {}  # derived views of the modules above (what it reaches, its key)

    @cached_property
    def node(self) -> ast.ClassDef:
        return self.module.classes[self.name]

    @property
    def target(self) -> str:
        """The spec's `class`: "package.module:ClassName"."""
        return f"{self.module.name}:{self.name}"

    def __repr__(self) -> str:
        return f"ClassRef({self.target})"

    def __eq__(self, other) -> bool:
        return isinstance(other, ClassRef) and other.target == self.target

    def __hash__(self) -> int:
        return hash(self.target)

    @cached_property
    def bases(self) -> list[Base]:
        out = []
        for b in self.node.bases:
            try:
                dotted = self.module.resolve(ast.unparse(b))
            except Exception:  # noqa: BLE001 - an odd base expression is kept as text
                dotted = ast.unparse(b)
            t = torch_class(dotted)
            if t:
                out.append(Base("torch", t))
            elif self.corpus.module_of(dotted):
                out.append(Base("lib", dotted))
            else:
                out.append(Base("other", dotted))
        return out

    @cached_property
    def base_refs(self) -> list[ClassRef]:
        return [ref_of(self.corpus, b.name) for b in self.bases if b.kind == "lib"]

    @cached_property
    def lineage(self) -> list[ClassRef]:
        """This class and its library bases, depth first, each once (the part of the MRO we can read)."""
        out: list[ClassRef] = []
        stack = [self]
        seen = set()
        while stack:
            ref = stack.pop(0)
            if ref.target in seen:
                continue
            seen.add(ref.target)
            out.append(ref)
            stack = ref.base_refs + stack
        return out

    @cached_property
    def outer_bases(self) -> list[Base]:
        """The bases outside the corpus of this class and its library bases (torch classes, others)."""
        out: list[Base] = []
        for ref in self.lineage:
            out += [b for b in ref.bases if b.kind != "lib" and b not in out]
        return out

    @property
    def torch_norm(self) -> str | None:
        """The torch norm class it derives from (`torch.nn.LayerNorm`), if any."""
        for b in self.outer_bases:
            if b.kind == "torch" and b.name.rpartition(".")[2] in TORCH_NORMS:
                return b.name
        return None

    @property
    def is_module(self) -> bool:
        """Derives from torch.nn.Module through torch classes only (not a library layer or model base)."""
        return bool(self.outer_bases) and all(b.kind == "torch" for b in self.outer_bases)

    def method(self, name: str) -> tuple[ClassRef, ast.FunctionDef] | None:
        """The first definition of `name` along the lineage (None: torch's, or nowhere)."""
        for ref in self.lineage:
            for node in ref.node.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                    return ref, node
        return None

    def super_method(self, owner: ClassRef, name: str) -> tuple[ClassRef, ast.FunctionDef] | None:
        """`super().name` as seen from `owner`: the next definition after `owner` in the lineage."""
        chain = self.lineage
        idx = next((i for i, r in enumerate(chain) if r.target == owner.target), -1)
        for ref in chain[idx + 1:]:
            for node in ref.node.body:
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    return ref, node
        return None


def all_classes(corpus: Corpus) -> list[ClassRef]:
    """Every class of the corpus, in module then source order (each parsed only when its node is read)."""
    return [ref_of(corpus, f"{m.name}.{n}") for _, m in sorted(corpus.modules.items()) for n in m.headers]


def candidates(corpus: Corpus, word: str = "Norm") -> list[ClassRef]:
    """The classes whose name holds `word` or whose bases (by last name, followed through the corpus)
    reach one that does or a torch norm: a superset of the classes classify looks at, read from class
    headers alone so that only these are parsed."""
    marked = {n for m in corpus.modules.values() for n in m.headers if word in n} | set(TORCH_NORMS)
    grew = True
    while grew:
        grew = False
        for m in corpus.modules.values():
            for n, bases in m.headers.items():
                if n not in marked and any(b in marked for b in bases):
                    marked.add(n)
                    grew = True
    return [r for r in all_classes(corpus) if r.name in marked]


def ref_of(corpus: Corpus, dotted: str) -> ClassRef | None:
    """The one ClassRef of a dotted class name of the corpus (None: not a class of the corpus)."""
    refs = corpus.memo.setdefault("refs", {})
    if dotted not in refs:
        found = corpus.module_of(dotted)
        refs[dotted] = ClassRef(corpus, found[0], found[1]) if found else None
    return refs[dotted]
