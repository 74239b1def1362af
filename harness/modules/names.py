"""The lifted program's names: x for the forward's first input, the rest and every parameter by their own names.

A forward argument keeps its name (`gate`), a parameter or buffer its
state-dict name with dots as underscores (`norm.weight` -> `norm_weight`);
a name the language reserves (x, y, r, w, b, s, eps, torch, F, nn) or a
Python keyword gets a trailing underscore. The names are a pure function of
the module's state names, so a module case and its lifted program spec draw
their parameters under the same names (harness.oracle.inputs.draw_named_params).
"""
from __future__ import annotations

import keyword
import re

from harness.program.ir import RESERVED_NAMES


def program_name(name: str) -> str:
    """A state-dict or argument name as a name of the language."""
    out = re.sub(r"\W", "_", name)
    if not out or out[0].isdigit():
        out = "p_" + out
    while out.startswith("__"):
        out = out[1:]
    if out.endswith("__"):
        out = out.rstrip("_") + "_v"
    if out in RESERVED_NAMES or keyword.iskeyword(out):
        out += "_"
    return out


def unique(names, taken: set[str]) -> dict[str, str]:
    """{name: its program name}, distinct from each other and from `taken` (which is updated)."""
    out = {}
    for name in names:
        base = candidate = program_name(name)
        k = 2
        while candidate in taken:
            candidate, k = f"{base}_{k}", k + 1
        taken.add(candidate)
        out[name] = candidate
    return out
