"""The path registry: name -> "module:factory" (imported lazily).

Adding a path is one module under harness/paths/ and one line here. The
factory is called with no arguments and returns a `Path`. Extra paths (for
tests or plug-ins) come from `register()` or from the environment variable
NORMDIFF_EXTRA_PATHS="name=module:factory,name2=module:factory", which worker
processes inherit.
"""
from __future__ import annotations

import importlib
import os

from harness.paths.base import Path, Prepared, StageError, Unsupported, stage  # noqa: F401

REGISTRY: dict[str, str] = {
    "eager": "harness.paths.eager:EagerPath",
    "tvm": "harness.paths.tvm:TvmPath",
    "tvm-decompose": "harness.paths.tvm:TvmDecomposePath",
    "executorch": "harness.paths.executorch:ExecutorchPath",
    "executorch-xnnpack": "harness.paths.executorch_xnnpack:XnnpackPath",
    "executorch-recompose": "harness.paths.executorch_recompose:RecomposePath",
    "executorch-recompose-no-dim-order": "harness.paths.executorch_recompose:RecomposeNoDimOrderPath",
    "executorch-recompose-capture": "harness.paths.executorch_recompose:RecomposeCapturePath",
}


def _extra() -> dict[str, str]:
    out = {}
    for item in os.environ.get("NORMDIFF_EXTRA_PATHS", "").split(","):
        if "=" in item:
            name, target = item.split("=", 1)
            out[name.strip()] = target.strip()
    return out


def register(name: str, target: str) -> None:
    """Register a path in this process and in the workers it starts."""
    extra = _extra()
    extra[name] = target
    os.environ["NORMDIFF_EXTRA_PATHS"] = ",".join(f"{k}={v}" for k, v in extra.items())


def names() -> list[str]:
    """Every registered path name: the built-in ones first, in order."""
    return list(REGISTRY) + [n for n in _extra() if n not in REGISTRY]


def default_names() -> list[str]:
    """The paths `--paths` defaults to: every built-in path."""
    return list(REGISTRY)


_CACHE: dict[str, Path] = {}


def get(name: str) -> Path:
    """The path object for `name` (KeyError with the known names if unknown)."""
    if name in _CACHE:
        return _CACHE[name]
    table = {**REGISTRY, **_extra()}
    if name not in table:
        raise KeyError(f"unknown path {name!r}; known: {', '.join(names())}")
    module_name, attr = table[name].split(":")
    factory = getattr(importlib.import_module(module_name), attr)
    path = factory()
    path.name = name
    _CACHE[name] = path
    return path
