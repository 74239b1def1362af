"""The vocabulary of a case spec (docs/contracts.md §1): its keys, the values each takes, and the one-line SpecError.

Validators here name the key in every message, so a bad spec is one line.
"""
from __future__ import annotations

import math
from typing import Any

PATTERNS = ("layer_norm", "rms_norm", "group_norm", "instance_norm", "batch_norm")

# style -> (patterns it belongs to, the cast it writes by default or None)
STYLES: dict[str, tuple[tuple[str, ...], str | None]] = {
    "module": (PATTERNS, None),
    "upcast": (("layer_norm",), "float"),
    "manual": (("layer_norm",), None),
    "qwen": (("rms_norm",), "to"),
    "llama": (("rms_norm",), "type_as"),
    "t5": (("rms_norm",), "to"),
    "gemma": (("rms_norm",), "type_as"),
    "program": (PATTERNS, None),  # the case gives its own `program` (docs/contracts.md §7)
}
# The catalog's own styles: every style but "program" (whose case brings its program).
CATALOG_STYLES = tuple(s for s in STYLES if s != "program")
CASTS = ("to", "float", "type_as", "to_contiguous")
LAYOUTS = ("contiguous", "channels_last")
AFFINES = ("none", "weight", "weight_bias")

# input kind -> {parameter: default}
INPUT_KINDS: dict[str, dict[str, float]] = {
    "normal": {"mean": 0.0, "std": 1.0},
    "alternating": {"amplitude": 1.0, "offset": 0.0},
    "uniform": {"low": -1.0, "high": 1.0},
    "constant": {"value": 1.0},
    "outlier": {"std": 1.0, "scale": 100.0},
    "offset": {"offset": 1000.0, "std": 1.0},
    "overflow": {"magnitude": 300.0},
    "tiny": {"scale": 1e-6},
    "subnormal": {"fraction": 1.0},
}
PARAM_KINDS: dict[str, dict[str, float]] = {"ones": {}, "normal": {}}


def input_of(kind: str, **values: float) -> dict:
    """An input object with every parameter of `kind` written out: its defaults, then `values`.
    input_of("outlier") is the catalog's outlier input (one element a row 100x the rest: an LLM's activations)."""
    return {"kind": kind, **INPUT_KINDS[kind], **values}

KEYS = (
    "pattern", "style", "dtype", "weight_dtype", "cast", "shape", "layout",
    "affine", "eps", "groups", "input", "params", "seed",
)
# The keys of a program case (docs/contracts.md §7); a catalog case's normalised form has none of them,
# so its case_id is what it was before programs existed.
PROGRAM_KEYS = ("program", "inputs", "param_shapes")
EXTRA_INPUTS = ("y", "r")       # the extra inputs a program may read
PROGRAM_PARAMS = ("w", "b", "s")  # the parameters a program may read

class SpecError(ValueError):
    """A bad spec; the message is one line naming the key."""


def fail(key: str, problem: str):
    raise SpecError(f"spec key {key!r}: {problem}")


def choice(key: str, value: Any, allowed) -> str:
    if not isinstance(value, str):
        fail(key, f"expected a string, got {type(value).__name__} {value!r}")
    if value not in allowed:
        fail(key, f"unknown value {value!r}; expected one of {', '.join(allowed)}")
    return value


def number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail(key, f"expected a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        fail(key, f"expected a finite number, got {value!r}")
    return value


def integer(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        fail(key, f"expected an integer, got {type(value).__name__} {value!r}")
    return value


def kinded(key: str, value: Any, kinds: dict[str, dict[str, float]], ranges=None) -> dict:
    if not isinstance(value, dict):
        fail(key, f"expected an object like {{\"kind\": ...}}, got {value!r}")
    if "kind" not in value:
        fail(key, "missing \"kind\"")
    kind = choice(f"{key}.kind", value["kind"], tuple(kinds))
    out: dict[str, Any] = {"kind": kind}
    for name in value:
        if name != "kind" and name not in kinds[kind]:
            known = ", ".join(kinds[kind]) or "none"
            fail(f"{key}.{name}", f"unknown parameter for kind {kind!r} (known: {known})")
    for name, default in kinds[kind].items():
        out[name] = number(f"{key}.{name}", value.get(name, default))
    for name, (low, high) in (ranges or {}).get(kind, {}).items():
        if not low <= out[name] <= high:
            fail(f"{key}.{name}", f"must be in [{low:g}, {high:g}] for kind {kind!r}, got {out[name]!r}")
    if kind == "uniform" and out["low"] > out["high"]:
        fail(f"{key}.low", f"low {out['low']!r} is above high {out['high']!r}")
    return out


# Parameter ranges outside of which an input kind means nothing (or overflows float64).
BIG = 1e30
RANGES: dict[str, dict[str, tuple[float, float]]] = {
    "normal": {"std": (0.0, BIG), "mean": (-BIG, BIG)},
    "alternating": {"amplitude": (-BIG, BIG), "offset": (-BIG, BIG)},
    "uniform": {"low": (-BIG, BIG), "high": (-BIG, BIG)},
    "constant": {"value": (-BIG, BIG)},
    "outlier": {"std": (0.0, BIG), "scale": (0.0, BIG)},
    "offset": {"offset": (-BIG, BIG), "std": (0.0, BIG)},
    "overflow": {"magnitude": (0.0, BIG)},
    "tiny": {"scale": (0.0, BIG)},
    "subnormal": {"fraction": (0.0, 1.0)},
}


# The input kind of a tensor captured from a whole model's run (`normdiff model`, docs/models.md): not drawn but
# read from the store by its content hash (harness.core.captured); the spec's shape and dtype are the tensor's.
CAPTURED = "captured"


def x_input(key: str, value: Any) -> dict:
    """x's input object: an input kind of INPUT_KINDS, or {"kind": "captured", "sha256": 64 hex digits}."""
    if isinstance(value, dict) and value.get("kind") == CAPTURED:
        for name in value:
            if name not in ("kind", "sha256"):
                fail(f"{key}.{name}", "unknown parameter for kind 'captured' (known: sha256)")
        hexd = value.get("sha256")
        if not isinstance(hexd, str) or len(hexd) != 64 or any(c not in "0123456789abcdef" for c in hexd):
            fail(f"{key}.sha256", f"expected the 64 lowercase hex digits of the tensor's SHA-256, got {hexd!r}")
        return {"kind": CAPTURED, "sha256": hexd}
    return kinded(key, value, INPUT_KINDS, RANGES)


def dims_list(key: str, value: Any) -> tuple[int, ...]:
    """A non-empty list of positive ints (a shape), at most 16M elements."""
    if not isinstance(value, list) or not value or any(isinstance(d, bool) or not isinstance(d, int) or d < 1
                                                       for d in value):
        fail(key, f"expected a non-empty list of positive ints, got {value!r}")
    if math.prod(value) > 2**24:
        fail(key, f"{math.prod(value)} elements is over the 16M limit")
    return tuple(value)


def identifier(key: str, name: Any, reserved=()) -> str:
    """A plain Python identifier that is not reserved (an input's or a parameter's name)."""
    import keyword

    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__") \
            or name.endswith("__"):
        fail(key, f"{name!r} is not a plain identifier")
    if name in reserved:
        fail(key, f"{name!r} is a reserved name")
    return name


def input_object(key: str, value: Any) -> tuple[tuple[str, Any], ...]:
    """An extra input's object: an input kind of §1, with its own `shape` and `dtype` if given (else x's)."""
    from harness.core.dtypes import DTYPES

    if not isinstance(value, dict):
        fail(key, f"expected an object like {{\"kind\": ...}}, got {value!r}")
    rest = {k: v for k, v in value.items() if k not in ("shape", "dtype")}
    out = list(kinded(key, rest, INPUT_KINDS, RANGES).items())
    if "shape" in value:
        out.append(("shape", dims_list(f"{key}.shape", value["shape"])))
    if "dtype" in value:
        out.append(("dtype", choice(f"{key}.dtype", value["dtype"], DTYPES)))
    return tuple(out)


def style_variants() -> list[tuple[str, str, str | None]]:
    """Every catalog (pattern, style, cast): a casting style once per cast style (the suites' one list)."""
    out = []
    for pattern in PATTERNS:
        for style in CATALOG_STYLES:
            patterns, default_cast = STYLES[style]
            if pattern in patterns:
                out += [(pattern, style, c) for c in (CASTS if default_cast else (None,))]
    return out
