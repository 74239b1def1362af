"""Which submodules of a live model are norm instances: torch's norm classes, and any class the zoo's rules call a
norm when they read its source (harness.zoo.classify), never its behaviour.

Runs only in a worker (the model is user code). A class is classified by the
source file it was defined in, read as a one-file corpus; a class whose source
cannot be read is a norm only if it derives from one of torch's. A norm inside
a norm (a user's wrapper holding nn.LayerNorm) is one instance: the outer one.
"""
from __future__ import annotations

import inspect
import os
import sys

TORCH_NORM_CLASSES = ("LayerNorm", "RMSNorm", "GroupNorm", "_BatchNorm", "_InstanceNorm", "LocalResponseNorm")


def _torch_norm(cls) -> bool:
    import torch.nn as nn
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.instancenorm import _InstanceNorm

    bases = (nn.LayerNorm, nn.RMSNorm, nn.GroupNorm, _BatchNorm, _InstanceNorm, nn.LocalResponseNorm)
    return issubclass(cls, bases)


class NormClasses:
    """Decides, once per class, whether a class is a norm."""

    def __init__(self):
        self._memo: dict[type, bool] = {}
        self._corpora: dict[str, object] = {}

    def is_norm(self, cls) -> bool:
        if cls not in self._memo:
            self._memo[cls] = _torch_norm(cls) if cls.__module__.startswith("torch.") else self._by_source(cls)
        return self._memo[cls]

    def _by_source(self, cls) -> bool:
        from harness.zoo.classes import ref_of
        from harness.zoo.classify import Classifier

        try:
            path = inspect.getsourcefile(cls)
        except TypeError:
            path = None
        name = cls.__module__
        if not path or not os.path.exists(path) or "<" in cls.__qualname__:
            return _torch_norm(cls)
        corpus = self._corpus(name, path)
        ref = ref_of(corpus, f"{name}.{cls.__qualname__}")
        if ref is None:
            return _torch_norm(cls)
        return Classifier(corpus).classification(ref).is_norm or _torch_norm(cls)

    def _corpus(self, name: str, path: str):
        from harness.zoo.corpus import Corpus, parse_module

        if name not in self._corpora:
            folder = os.path.dirname(path)
            top = os.path.dirname(sys.modules[name.split(".")[0]].__file__ or folder) if "." in name else folder
            self._corpora[name] = Corpus(root=folder, sys_path=top, library=name,
                                         modules={name: parse_module(name, path, os.path.basename(folder))})
        return self._corpora[name]


def norm_instances(model) -> list[tuple[str, object]]:
    """(module path, submodule) of every norm instance, in the model's own order; a norm inside one is left out."""
    classes = NormClasses()
    found: list[tuple[str, object]] = []
    for path, sub in model.named_modules():
        if not path or not classes.is_norm(type(sub)):
            continue
        if any(path.startswith(outer + ".") for outer, _ in found):
            continue
        found.append((path, sub))
    return found


def class_path(cls) -> str:
    """"package.module:QualName" of a class."""
    return f"{cls.__module__}:{cls.__qualname__}"
