"""Import a module case's class and build it from `init`: only ever inside a worker process.

`build(spec)` imports "package.module:ClassName" with Python's import system
(installed packages and PYTHONPATH), builds the config object `init.config`
names, calls the constructor with `init` under a seeded RNG (a constructor
that draws, as nn.Linear's does, draws the same values every time), and moves
the module to `weight_dtype` with `.to()`, as `model.to(dtype)` does. Anything
that goes wrong is a ModuleSpecError: one line naming the class and why, but
for a refused allocation (ModuleOutOfMemory): a class that outgrows the
worker's memory limit is not a bad spec but one failing case.
"""
from __future__ import annotations

import importlib
import inspect

from harness.core.dtypes import torch_dtype
from harness.core.memory import is_out_of_memory


class ModuleSpecError(Exception):
    """A module case whose class cannot be found or built: a bad spec (one line naming the class)."""


class ModuleOutOfMemory(MemoryError):
    """A class whose constructor (or its .to()) ran out of memory: its executions fail, the spec is fine."""


class Unliftable(Exception):
    """A module whose graph holds what the program language cannot (one line naming the op and the class)."""


def _line(exc: BaseException) -> str:
    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    return f"{type(exc).__name__}: {text}"[:300]


def import_object(path: str, what: str = "class"):
    """The object "package.module:Name" (Name may be Outer.Inner) names; ModuleSpecError if there is none."""
    module_name, _, attr = path.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - a module that fails to import is a bad spec
        raise ModuleSpecError(f"{what} {path}: cannot import {module_name} ({_line(exc)})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ModuleSpecError(f"{what} {path}: {module_name} has no {what} {attr!r}")
        obj = getattr(obj, part)
    return obj


def import_class(path: str, factory: bool = False):
    """The nn.Module subclass `path` names (with `factory`, also a function returning a module)."""
    import torch

    cls = import_object(path)
    if factory and inspect.isfunction(cls):
        return cls
    if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)):
        raise ModuleSpecError(f"class {path}: not a torch.nn.Module subclass")
    return cls


def build_config(config: dict, owner: str):
    """The config object {"class": "pkg.mod:ConfigClass", field: value, …} describes."""
    cls = import_object(config["class"], "config class")
    fields = {k: v for k, v in config.items() if k != "class"}
    try:
        return cls(**fields)
    except Exception as exc:  # noqa: BLE001
        raise ModuleSpecError(f"class {owner}: its config {config['class']} rejects {sorted(fields)} "
                              f"({_line(exc)})") from None


def build(spec, factory: bool = False):
    """The eval-mode module of a module case, in `weight_dtype`, with the constructor's own values; a whole model
    (`factory`, or a case naming an `instance` of it) may come from a function returning one."""
    import torch

    cls = import_class(spec.cls, factory=factory or spec.instance is not None)
    init = spec.init_dict
    if isinstance(init.get("config"), dict) and "class" in init["config"]:
        init["config"] = build_config(init["config"], spec.cls)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.seed)
            module = cls(**init)
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"it returned a {type(module).__name__}, not a torch.nn.Module")
    except Exception as exc:  # noqa: BLE001 - a constructor that rejects init is a bad spec
        if is_out_of_memory(exc):
            raise ModuleOutOfMemory(f"class {spec.cls}: its constructor ran out of memory ({_line(exc)})") from None
        raise ModuleSpecError(f"class {spec.cls}: its constructor rejects init {sorted(init)} ({_line(exc)})") from None
    try:
        module = module.to(torch_dtype(spec.weight_dtype))
    except Exception as exc:  # noqa: BLE001
        if is_out_of_memory(exc):
            raise ModuleOutOfMemory(f"class {spec.cls}: .to({spec.weight_dtype}) ran out of memory "
                                    f"({_line(exc)})") from None
        raise ModuleSpecError(f"class {spec.cls}: .to({spec.weight_dtype}) failed ({_line(exc)})") from None
    return instance_of(module.eval(), spec)


def instance_of(model, spec):
    """The submodule `spec.instance` of the built model (a norm instance of a whole model: docs/models.md), or the
    model itself for a case that names none."""
    if spec.instance is None:
        return model
    try:
        return model.get_submodule(spec.instance)
    except AttributeError:
        raise ModuleSpecError(f"class {spec.cls}: the built model has no submodule {spec.instance!r}") from None


def forward_names(module, spec) -> tuple[str, ...]:
    """The forward's parameter names (the first is x); ModuleSpecError if `inputs` names one it lacks,
    or leaves out one it requires."""
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError) as exc:
        raise ModuleSpecError(f"class {spec.cls}: its forward has no signature ({_line(exc)})") from None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not positional:
        raise ModuleSpecError(f"class {spec.cls}: its forward takes no input")
    names = tuple(p.name for p in positional)
    given = {n for n, _ in spec.inputs}
    for name in sorted(given):
        if name not in names[1:]:
            raise ModuleSpecError(f"class {spec.cls}: forward has no parameter {name!r} after the first "
                                  f"(it takes {', '.join(names)})")
    for p in positional[1:]:
        if p.default is p.empty and p.name not in given:
            raise ModuleSpecError(f"class {spec.cls}: forward requires {p.name!r}; give it in inputs")
    return names
