"""The path registry: name -> "module:factory" (imported lazily).

Adding a path is one module under harness/paths/ and one line here; the
module's `Path` subclass carries its description, packages, warm imports and
repro-script fragment. The factory is called with no arguments and returns a
`Path`. Extra paths (tests, out-of-tree plug-ins) come from `register()` or
from the environment variable NORMDIFF_EXTRA_PATHS="name=module:factory,…",
which worker processes inherit.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os

from harness.paths.base import (  # noqa: F401
    Capture, Intermediate, IntermediatesUnavailable, Path, Prepared, StageError, Unsupported, stage)

REGISTRY: dict[str, str] = {
    "eager": "harness.paths.eager:EagerPath",
    "tvm": "harness.paths.tvm:TvmPath",
    "tvm-decompose": "harness.paths.tvm:TvmDecomposePath",
    "executorch": "harness.paths.executorch:ExecutorchPath",
    "executorch-xnnpack": "harness.paths.executorch_xnnpack:XnnpackPath",
    "executorch-recompose": "harness.paths.executorch_recompose:RecomposePath",
    "executorch-recompose-no-dim-order": "harness.paths.executorch_recompose:RecomposeNoDimOrderPath",
    "executorch-recompose-capture": "harness.paths.executorch_recompose:RecomposeCapturePath",
    "tvm-decompose-inference": "harness.paths.tvm:TvmDecomposeInferencePath",
    "inductor": "harness.paths.inductor:InductorPath",
    "inductor-emulate": "harness.paths.inductor:InductorEmulatePath",
    "onnxruntime": "harness.paths.onnxruntime:OnnxRuntimePath",
    "onnxruntime-fused": "harness.paths.onnxruntime:OnnxRuntimeFusedPath",
    "iree": "harness.paths.iree:IreePath",
    "openvino": "harness.paths.openvino:OpenVinoPath",
    "openvino-bf16": "harness.paths.openvino:OpenVinoBf16Path",
}

ENV = "NORMDIFF_EXTRA_PATHS"


def extra() -> dict[str, str]:
    """The paths NORMDIFF_EXTRA_PATHS adds: name -> "module:factory"."""
    out = {}
    for item in os.environ.get(ENV, "").split(","):
        if "=" in item:
            name, target = item.split("=", 1)
            out[name.strip()] = target.strip()
    return out


def table() -> dict[str, str]:
    """Every registered path: name -> "module:factory"."""
    return {**REGISTRY, **extra()}


def register(name: str, target: str) -> None:
    """Register a path in this process and in the workers it starts."""
    more = extra()
    more[name] = target
    os.environ[ENV] = ",".join(f"{k}={v}" for k, v in more.items())


def names() -> list[str]:
    """Every registered path name: the built-in ones first, in order."""
    return list(REGISTRY) + [n for n in extra() if n not in REGISTRY]


def default_names() -> list[str]:
    """The paths `--paths` defaults to: every built-in path."""
    return list(REGISTRY)


_CACHE: dict[str, Path] = {}


def get(name: str) -> Path:
    """The path object for `name` (KeyError with the known names if unknown)."""
    if name in _CACHE:
        return _CACHE[name]
    targets = table()
    if name not in targets:
        raise KeyError(f"unknown path {name!r}; known: {', '.join(names())}")
    module_name, attr = targets[name].split(":")
    factory = getattr(importlib.import_module(module_name), attr)
    path = factory()
    path.name = name
    _CACHE[name] = path
    return path


# A record names a distribution by what users import, where the two differ.
_RECORD_NAMES = {"apache-tvm": "tvm"}


def installed_version(dist: str) -> str | None:
    """The installed version of distribution `dist`, or None."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


_VERSIONS: dict[str, str | None] = {}


def record_versions() -> dict[str, str | None]:
    """The `versions` of every record: numpy and each built-in path's packages."""
    if not _VERSIONS:
        dists = ["numpy"] + [d for n in REGISTRY for d in get(n).packages]
        for d in dict.fromkeys(dists):
            _VERSIONS[_RECORD_NAMES.get(d, d)] = installed_version(d)
    return dict(_VERSIONS)
