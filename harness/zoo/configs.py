"""A norm's model config class and its fields, read from the model's `configuration_*.py` (no import).

A class that takes `config` gets its model's own config class: the one its annotation names
(`config: ZayaConfig`, resolved through the modeling file's imports), else the config class of the
model's configuration file whose name shares the longest prefix with the norm's. Its fields (the
dataclass-style annotated fields of transformers 5, or an older `__init__`'s keyword defaults,
inherited ones included) say what can be overridden and what the defaults are.
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field

from harness.zoo.classes import ClassRef
from harness.zoo.corpus import Corpus, Module, parse_module

NO_DEFAULT = object()


@dataclass(frozen=True)
class ConfigClass:
    target: str  # "package.module:ClassName"
    fields: dict = field(default_factory=dict)  # name -> default (NO_DEFAULT when not a literal)

    def default(self, name: str):
        return self.fields.get(name, NO_DEFAULT)


def _module_path(corpus: Corpus, dotted: str) -> str:
    return os.path.join(corpus.sys_path, *dotted.split(".")) + ".py"


def _config_module(corpus: Corpus, dotted: str) -> Module | None:
    cache = corpus.memo.setdefault("config_modules", {})
    if dotted not in cache:
        path = _module_path(corpus, dotted)
        cache[dotted] = parse_module(dotted, path, os.path.basename(os.path.dirname(path))) \
            if os.path.isfile(path) else None
    return cache[dotted]


def _literal(node: ast.AST | None):
    if node is None:
        return NO_DEFAULT
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NO_DEFAULT


def _fields(corpus: Corpus, module: Module, name: str, depth: int = 0) -> dict:
    """Fields of a config class, bases first (a subclass overrides), inherited across config files."""
    node = module.classes[name]
    out: dict = {}
    if depth < 8:
        for base in node.bases:
            dotted = module.resolve(ast.unparse(base))
            mod_name, _, cls = dotted.rpartition(".")
            base_mod = _config_module(corpus, mod_name) if mod_name else None
            if base_mod is not None and cls in base_mod.classes:
                out.update(_fields(corpus, base_mod, cls, depth + 1))
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out[stmt.target.id] = _literal(stmt.value)
        elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
            args = stmt.args.args[1:]
            defaults = [None] * (len(args) - len(stmt.args.defaults)) + list(stmt.args.defaults)
            for a, d in zip(args, defaults):
                out[a.arg] = _literal(d)
            for a, d in zip(stmt.args.kwonlyargs, stmt.args.kw_defaults):
                out[a.arg] = _literal(d)
    return out


def _load(corpus: Corpus, dotted: str) -> ConfigClass | None:
    mod_name, _, cls = dotted.rpartition(".")
    mod = _config_module(corpus, mod_name) if mod_name else None
    if mod is None or cls not in mod.classes:
        return None
    return ConfigClass(f"{mod_name}:{cls}", _fields(corpus, mod, cls))


def _annotated(ref: ClassRef) -> str | None:
    """The dotted name the `config` parameter's annotation names, along the constructor chain."""
    found = ref.method("__init__")
    if not found:
        return None
    owner, fn = found
    for a in fn.args.args + fn.args.kwonlyargs:
        if a.arg == "config" and a.annotation is not None:
            text = ast.unparse(a.annotation).strip("'\"").split("|")[0].strip()
            return owner.module.resolve(text)
    return None


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def config_of(ref: ClassRef) -> tuple[ConfigClass | None, str]:
    """(the config class for `ref`, how it was found) or (None, why not)."""
    dotted = _annotated(ref)
    if dotted:
        found = _load(ref.corpus, dotted)
        if found:
            return found, "annotation"
    stem = "configuration_" + ref.module.name.rpartition(".")[2].removeprefix("modeling_")
    mod_name = f"{ref.module.name.rpartition('.')[0]}.{stem}"
    mod = _config_module(ref.corpus, mod_name)
    if mod is None:
        return None, f"no config file {stem}.py next to {ref.module.name}"
    names = [n for n in mod.headers if n.endswith("Config")]
    if not names:
        return None, f"no config class in {mod_name}"
    best = max(names, key=lambda n: (_common_prefix(n, ref.name), -len(n), n))
    return _load(ref.corpus, f"{mod_name}.{best}"), "name prefix"
