"""The code a module class's graph comes from, as one digest: what a kept lifted program is keyed by.

A user edits their norm class between runs, so a lifted program (and every
artifact compiled from the module) kept on disk must be keyed by its code,
not by its name. The digest covers the source files of every class of its
MRO outside torch, and of what their methods (and the functions, classes and
modules they name) reach through their globals, followed transitively within
code that is neither torch's, nor the standard library's, nor a compiled
extension's; and the version of each installed distribution holding one of
those files. Code reached only in other ways (`getattr` on a string, a
registry filled at import) is not seen: `--no-cache` builds everything.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import os
import sys
import sysconfig
import types

_SKIP_PACKAGES = ("torch", "numpy", "builtins", "typing", "functools", "collections", "abc")
_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"])
_DIGESTS: dict[type, str] = {}


def _outside(module_name: str) -> bool:
    """Whether a module is not the user's code to follow (torch, numpy, the standard library)."""
    top = module_name.partition(".")[0]
    if top in _SKIP_PACKAGES or top in sys.stdlib_module_names:
        return True
    module = sys.modules.get(module_name)
    source = getattr(module, "__file__", None) or ""
    return not source.endswith(".py") or os.path.realpath(source).startswith(_STDLIB + os.sep) and \
        "site-packages" not in source


def _code_objects(obj) -> list[types.CodeType]:
    """The code of a function, or of every function, property and static/class method a class defines."""
    if isinstance(obj, types.FunctionType):
        return [obj.__code__]
    out = []
    for value in vars(obj).values() if inspect.isclass(obj) else ():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            out += [f.__code__ for f in (value.fget, value.fset) if isinstance(f, types.FunctionType)]
        elif isinstance(value, types.FunctionType):
            out.append(value.__code__)
    return out


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _globals_of(obj) -> dict:
    if isinstance(obj, types.FunctionType):
        return obj.__globals__
    module = sys.modules.get(getattr(obj, "__module__", ""))
    return vars(module) if module is not None else {}


def source_files(cls) -> list[str]:
    """The source files of `cls`'s code (see the module's docstring), sorted."""
    files: set[str] = set()
    seen: set[int] = set()
    todo = [c for c in cls.__mro__ if not _outside(c.__module__)]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, types.ModuleType):
            if getattr(obj, "__file__", None) and not _outside(obj.__name__):
                files.add(os.path.realpath(obj.__file__))
            continue
        module_name = getattr(obj, "__module__", None) or ""
        if _outside(module_name):
            continue
        files.add(os.path.realpath(sys.modules[module_name].__file__))
        scope = _globals_of(obj)
        for code in _code_objects(obj):
            for name in _names(code):
                value = scope.get(name)
                if isinstance(value, (types.FunctionType, types.ModuleType)) or inspect.isclass(value):
                    todo.append(value)
    return sorted(files)


@functools.cache
def _owners() -> dict:
    import importlib.metadata

    return importlib.metadata.packages_distributions()


def _distribution_versions(files: list[str]) -> dict[str, str]:
    """{distribution: version} of the installed distributions that hold any of `files`."""
    import importlib.metadata

    owners = _owners()
    roots = sorted({os.path.realpath(r) for r in sys.path if r}, key=len, reverse=True)
    out = {}
    for f in files:
        root = next((r for r in roots if f.startswith(r + os.sep)), None)  # the deepest: a package's own root
        if root is None:
            continue
        top = os.path.relpath(f, root).split(os.sep)[0].removesuffix(".py")
        for dist in owners.get(top, ()):
            try:
                out[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                pass
    return dict(sorted(out.items()))


def code_digest(cls) -> str:
    """sha256 of `cls`'s source files (their contents) and the versions of the distributions holding them."""
    if cls not in _DIGESTS:
        files = source_files(cls)
        digest = hashlib.sha256(repr(_distribution_versions(files)).encode())
        for f in files:
            with open(f, "rb") as fh:
                digest.update(os.path.basename(f).encode() + b"\0" + fh.read() + b"\0")
        _DIGESTS[cls] = digest.hexdigest()
    return _DIGESTS[cls]
