"""The mode keys of a case (docs/contracts.md §1): what a compiler is asked to do with the norm, besides the norm.

`grad` asks for the backward: the case's outputs become the vector-Jacobian
products of the forward with a drawn cotangent (`cotangent`, an input object),
the gradient of each input, then of each floating parameter. `dynamic` asks for
a symbolic compile: the listed dims of x compile as symbolic sizes in
[1, `dynamic_max`], and `shape` is the size the case runs at, so one compiled
artifact serves every size (`structure_key` drops them).

The two are designed together because both change what a path compiles without
changing the norm: a path declares whether it can (harness.paths.base `Path.trains`,
`Path.symbolic`), and a case that asks for neither is byte for byte what it was
(none of these keys in its normalised form).
"""
from __future__ import annotations

from typing import Any

from harness.spec.keys import INPUT_KINDS, RANGES, fail, integer, kinded

MODE_KEYS = ("grad", "cotangent", "dynamic", "dynamic_max")
# The cotangent a gradient case draws when its spec names none.
DEFAULT_COTANGENT = {"kind": "normal"}
# The largest size a symbolic dim is compiled for unless the spec says `dynamic_max`: past 65,536 (float16's
# range of exact counts: a count kept in float16 is inf from 65,520) and 70,000 (the probe) with room.
DYNAMIC_MAX = 131072
# The catalog dims a norm module's construction fixes (a symbolic size there could not be built): layer/rms
# normalise the last dim (normalized_shape), group/instance/batch size their modules by the channels (dim 1).
_FIXED = {"layer_norm": -1, "rms_norm": -1, "group_norm": 1, "instance_norm": 1, "batch_norm": 1}


def grad_keys(raw: dict) -> tuple[bool, tuple]:
    """(grad, cotangent): `grad` is a boolean; `cotangent` an input object, only with grad (default normal)."""
    grad = raw.get("grad", False)
    if not isinstance(grad, bool):
        fail("grad", f"expected true or false, got {grad!r}")
    if "cotangent" in raw and not grad:
        fail("cotangent", "only a gradient case (\"grad\": true) draws a cotangent")
    if not grad:
        return False, ()
    return True, tuple(kinded("cotangent", raw.get("cotangent", DEFAULT_COTANGENT), INPUT_KINDS, RANGES).items())


def dynamic_keys(raw: dict, shape: tuple[int, ...], pattern: str | None) -> tuple[tuple[int, ...], int | None]:
    """(dynamic dims, their maximum): distinct dims of x, sorted; `dynamic_max` at least every such size.

    `pattern` is the catalog pattern whose module fixes a dim, or None for a program or module case (whose
    own code decides: a path that cannot compile it symbolically says so in its record).
    """
    if "dynamic" not in raw:
        if "dynamic_max" in raw:
            fail("dynamic_max", "only a case with symbolic dims (\"dynamic\": [dims]) takes a maximum")
        return (), None
    value = raw["dynamic"]
    if not isinstance(value, list) or not value:
        fail("dynamic", f"expected a non-empty list of dims of x, got {value!r}")
    dims = tuple(integer("dynamic", d) for d in value)
    if any(not 0 <= d < len(shape) for d in dims):
        fail("dynamic", f"dims must be in [0, {len(shape)}) for a {len(shape)}-D shape, got {list(dims)}")
    if len(set(dims)) != len(dims):
        fail("dynamic", f"each dim once, got {list(dims)}")
    if pattern is not None:
        fixed = _FIXED[pattern] % len(shape)
        if fixed in dims:
            fail("dynamic", f"dim {fixed} sizes the {pattern} module itself (its normalized shape or channels); "
                            "it cannot be symbolic in a catalog case")
    top = integer("dynamic_max", raw.get("dynamic_max", DYNAMIC_MAX))
    small = max(shape[d] for d in dims)
    if top < small:
        fail("dynamic_max", f"{top} is below the size {small} the case runs at")
    return tuple(sorted(dims)), top


def mode_dict(grad: bool, cotangent: tuple, dynamic: tuple[int, ...], dynamic_max: int | None) -> dict[str, Any]:
    """The mode keys of a normalised spec: only those a case asks for (a case asking none adds nothing)."""
    out: dict[str, Any] = {}
    if grad:
        out["grad"] = True
        out["cotangent"] = dict(cotangent)
    if dynamic:
        out["dynamic"] = list(dynamic)
        out["dynamic_max"] = dynamic_max
    return out
