"""The module keys of a case (docs/contracts.md §8): `class`, `init`, `inputs`, and what a module case may not say.

Checked here as data only: the class is named, never imported. A module case
is user code, imported, built and exported only inside worker processes
(harness.modules); whether the class exists and its constructor takes `init`
is checked there, before any path runs.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from harness.spec.keys import fail, identifier, input_object

MODULE_KEYS = ("class", "init", "instance")
# params kinds of a module case: `init` keeps the constructor's values; `ones`/`normal` redraw every
# floating parameter and buffer (harness.oracle.inputs.draw_named_params)
MODULE_PARAM_KINDS: dict[str, dict[str, float]] = {"init": {}, "ones": {}, "normal": {}}
# what a class writes itself: its casts, parameters, groups and eps live in its code and `init`
NOT_FOR_MODULES = ("cast", "affine", "groups", "eps", "program", "param_shapes")
# the pattern a module case may leave out; its lifted program shows the family (the record's lifted_pattern)
UNSAID_PATTERN = "program"
_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
CLASS_RE = re.compile(rf"^{_DOTTED}:{_DOTTED}$")
MAX_INIT = 100_000  # characters of init's JSON


def class_name(value: Any) -> str:
    """`package.module:ClassName` (a nested class as Outer.Inner)."""
    if not isinstance(value, str) or not CLASS_RE.match(value):
        fail("class", f"expected \"package.module:ClassName\", got {value!r}")
    return value


def instance_path(value: Any) -> str:
    """A submodule's path in the built model, as `named_modules()` names it (`model.layers.1.input_layernorm`)."""
    if not isinstance(value, str) or not re.match(r"^\w+(?:\.\w+)*$", value):
        fail("instance", f"expected a module path like \"model.layers.1.input_layernorm\", got {value!r}")
    return value


def _json_value(key: str, value: Any, depth: int = 0) -> None:
    if depth > 20:
        fail(key, "nested too deeply")
    if isinstance(value, float) and not math.isfinite(value):
        fail(key, f"expected a finite number, got {value!r}")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                fail(key, f"keys must be strings, got {k!r}")
            _json_value(f"{key}.{k}", v, depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _json_value(f"{key}[{i}]", v, depth + 1)
    elif not (value is None or isinstance(value, (bool, int, float, str))):
        fail(key, f"expected JSON data, got {type(value).__name__}")


def init_json(value: Any) -> str:
    """The constructor's keyword arguments as canonical JSON; `config` is {"class": "pkg.mod:Cls", field: …}."""
    if not isinstance(value, dict):
        fail("init", f"expected an object of keyword arguments, got {value!r}")
    for name, arg in value.items():
        identifier(f"init.{name}", name)
        _json_value(f"init.{name}", arg)
    config = value.get("config")
    if isinstance(config, dict) and "class" in config:
        try:
            class_name(config["class"])
        except ValueError as exc:
            fail("init.config.class", str(exc).split(": ", 1)[-1])
        for name in config:
            if name != "class":
                identifier(f"init.config.{name}", name)
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    if len(text) > MAX_INIT:
        fail("init", f"longer than {MAX_INIT} characters")
    return text


def module_inputs(raw: Any) -> tuple:
    """The forward's arguments after the first, by parameter name: input objects (their own shape/dtype if given)."""
    if not isinstance(raw, dict):
        fail("inputs", f"expected an object like {{\"gate\": {{\"kind\": ...}}}}, got {raw!r}")
    return tuple((identifier(f"inputs.{name}", name), input_object(f"inputs.{name}", raw[name]))
                 for name in sorted(raw))


def check_module_raw(raw: dict) -> None:
    """What a module case may not say (its class writes it)."""
    for key in NOT_FOR_MODULES:
        if key in raw:
            fail(key, "a module case's class writes its own casts, parameters, groups and eps (give them in init)")
