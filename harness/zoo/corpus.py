"""A library's modeling files, read and parsed, never imported: reading a file is not running it.

A corpus is a folder of `modeling_*.py` files (transformers: `<package>/models/*/modeling_*.py`) and
the dotted module name each file has when imported from its import root. Every module keeps its
classes, module-level functions and the names its imports bind, so that bases and helpers can be
followed across files without executing anything.
"""
from __future__ import annotations

import ast
import bisect
import fnmatch
import importlib.util
import os
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

DEFAULT_PACKAGE = "transformers"
DEFAULT_GLOB = "modeling_*.py"
GENERATED_MARK = "This file was automatically generated from"
MODULAR_PREFIX = "modular_"


class CorpusError(ValueError):
    """The folder or package cannot be read as a corpus (one line, for exit 2)."""


_TOP = re.compile(r"^[^\s#)\]}]", re.M)  # a line that may start a top-level statement
_CLASS = re.compile(r"^class\s+(\w+)\s*(?:\(([^)]*)\))?\s*:", re.M)
_DEF = re.compile(r"^(?:async\s+)?def\s+(\w+)\s*\(", re.M)
_IMPORT = re.compile(r"^(?:from\s+\S+\s+)?import\s", re.M)


class _Defs(Mapping):
    """Top-level classes or functions of a file by name, each parsed from its own lines when first read."""

    def __init__(self, module: Module, starts: dict[str, int]):
        self._module, self._starts, self._nodes = module, starts, {}

    def __getitem__(self, name):
        if name not in self._nodes:
            self._nodes[name] = self._module.statement(self._starts[name])
        return self._nodes[name]

    def __contains__(self, name):  # without parsing (Mapping's would read the item)
        return name in self._starts

    def __iter__(self):
        return iter(self._starts)

    def __len__(self):
        return len(self._starts)


class Module:
    """One modeling file, read as text; a class, function or import is parsed when first needed.

    Parsing a whole library's files is tens of seconds; parsing the few statements the zoo reads is
    well under one. A statement runs from its first line to the next line that can start a top-level
    statement; a boundary inside a string or brackets makes a parse fail, and the segment grows.
    """

    def __init__(self, name: str, path: str, model: str, text: str):
        self.name, self.path, self.model, self.text = name, path, model, text
        self.generated = GENERATED_MARK in text[:2000]  # written by a generator (modular files), not by hand
        self._bounds = [m.start() for m in _TOP.finditer(text)] + [len(text)]
        self.headers = {m.group(1): _simple_bases(m.group(2) or "") for m in _CLASS.finditer(text)}
        self.classes = _Defs(self, {m.group(1): m.start() for m in _CLASS.finditer(text)})
        self.functions = _Defs(self, {m.group(1): m.start() for m in _DEF.finditer(text)})
        self._imports: dict[str, str] | None = None

    def statement(self, offset: int) -> ast.stmt:
        i = bisect.bisect_right(self._bounds, offset)
        while True:
            end = self._bounds[i] if i < len(self._bounds) else len(self.text)
            try:
                return ast.parse(self.text[offset:end], filename=self.path).body[0]
            except SyntaxError:
                if end >= len(self.text):
                    raise CorpusError(f"{self.path}: cannot parse the statement at offset {offset}") from None
                i += 1

    @property
    def imports(self) -> dict[str, str]:
        """Bound name -> dotted target, for the file's top-level imports."""
        if self._imports is None:
            self._imports = {}
            for m in _IMPORT.finditer(self.text):
                node = self.statement(m.start())
                if isinstance(node, ast.Import):
                    for a in node.names:
                        self._imports[a.asname or a.name.partition(".")[0]] = a.name if a.asname else a.name.partition(".")[0]
                elif isinstance(node, ast.ImportFrom):
                    src = _absolute(self.name, node.level, node.module)
                    for a in node.names:
                        self._imports[a.asname or a.name] = f"{src}.{a.name}"
        return self._imports

    def resolve(self, dotted: str) -> str:
        """A dotted expression of this module (`nn.LayerNorm`) as a full dotted name (`torch.nn.LayerNorm`)."""
        head, _, rest = dotted.partition(".")
        if head in self.headers or head in self.functions:
            head = f"{self.name}.{head}"
        elif head in self.imports:
            head = self.imports[head]
        return f"{head}.{rest}" if rest else head


def _simple_bases(text: str) -> tuple[str, ...]:
    """The last names of a class header's bases (`nn.LayerNorm, Mixin` -> LayerNorm, Mixin)."""
    out = []
    for part in text.split(","):
        part = part.strip().split("[")[0]
        if part and "=" not in part:
            out.append(part.rpartition(".")[2])
    return tuple(out)


def _absolute(module: str, level: int, target: str | None) -> str:
    """The absolute module a relative `from` import of `module` names."""
    if level == 0:
        return target or ""
    parts = module.split(".")
    base = parts[: len(parts) - level]
    return ".".join(base + ([target] if target else []))


def parse_module(name: str, path: str, model: str) -> Module:
    with open(path, encoding="utf-8") as fh:
        return Module(name, path, model, fh.read())


def package_dir(package: str) -> str:
    """The folder of an installed package, found without importing it (nor any parent)."""
    head, *rest = package.split(".")
    try:
        spec = importlib.util.find_spec(head)  # a top-level name: finds, does not execute
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError(f"package {package!r} is not installed (not found on sys.path)")
    folder = list(spec.submodule_search_locations)[0]
    for part in rest:
        folder = os.path.join(folder, part)
        if not os.path.isdir(folder):
            raise CorpusError(f"package {package!r}: no folder {folder}")
    return folder


def import_root(folder: str) -> tuple[str, str]:
    """(the folder to put on sys.path, the dotted package name of `folder` from there)."""
    folder = os.path.abspath(folder)
    parts: list[str] = []
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, name = os.path.split(folder)
        parts.insert(0, name)
    return folder, ".".join(parts)


@dataclass
class Corpus:
    """Every modeling file under `root`, by dotted module name."""

    root: str  # the folder searched
    sys_path: str  # the import root the dotted names are relative to
    modules: dict[str, Module]
    library: str  # a label for reports: the package name, or the folder
    copied: Counter = field(default_factory=Counter)  # class name -> how many modular files derive from it
    memo: dict = field(default_factory=dict, repr=False)  # derived views, filled by the modules above

    def module_of(self, dotted: str) -> tuple[Module, str] | None:
        """(module, class name) of a dotted class name defined in the corpus, or None."""
        mod, _, name = dotted.rpartition(".")
        m = self.modules.get(mod)
        return (m, name) if m is not None and name in m.classes else None

    @cached_property
    def class_names(self) -> frozenset[str]:
        return frozenset(n for m in self.modules.values() for n in m.headers)

    def sibling(self, module: Module, stem: str) -> str:
        """The path of a file named `stem`.py next to `module` (it may not exist)."""
        return os.path.join(os.path.dirname(module.path), stem + ".py")

    def sibling_name(self, module: Module, stem: str) -> str:
        return f"{module.name.rpartition('.')[0]}.{stem}" if "." in module.name else stem


def load(root: str | None = None, package: str | None = None, pattern: str = DEFAULT_GLOB) -> Corpus:
    """The corpus of a folder (`root`) or of an installed package (default transformers: its models/)."""
    if root is None:
        pkg = package or DEFAULT_PACKAGE
        base = package_dir(pkg)
        root = os.path.join(base, "models") if os.path.isdir(os.path.join(base, "models")) else base
        library = pkg
    else:
        if not os.path.isdir(root):
            raise CorpusError(f"--root: no such folder: {root}")
        library = os.path.abspath(root)
    root = os.path.abspath(root)
    modules: dict[str, Module] = {}
    copied: Counter = Counter()
    sys_path = None
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        for f in sorted(files):
            if f.startswith(MODULAR_PREFIX) and f.endswith(".py"):
                copied.update(_modular_bases(os.path.join(folder, f)))
            if not _matches(f, pattern):
                continue
            top, pkg = import_root(folder)
            sys_path = sys_path or top
            name = f"{pkg}.{f[:-3]}" if pkg else f[:-3]
            modules[name] = parse_module(name, os.path.join(folder, f), os.path.basename(folder))
    if not modules:
        raise CorpusError(f"no {pattern} files under {root}")
    return Corpus(root=root, sys_path=sys_path or root, modules=modules, library=library, copied=copied)


def _modular_bases(path: str) -> list[str]:
    """The bases named by a modular file's classes: transformers generates modeling files from these,
    copying each base's code under the new name, so a base named often is the original of many copies."""
    with open(path, encoding="utf-8") as fh:
        return [b for m in _CLASS.finditer(fh.read()) for b in _simple_bases(m.group(2) or "")]


def _matches(filename: str, pattern: str) -> bool:
    return filename.endswith(".py") and fnmatch.fnmatch(filename, pattern)
