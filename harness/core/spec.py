"""The case spec (DESIGN §1): one norm, one style, dtype, layout, cast, input.

`CaseSpec.from_dict` validates a JSON object and fills in the defaults; every
problem is a `SpecError` whose one-line message names the key. The normalised
spec serialises to the same JSON bytes in every process, so `case_id` (a hash
of those bytes) is stable across processes and machines.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, fields
from typing import Any

from harness.core.dtypes import DTYPES
from harness.program.ir import ProgramCase, ProgramError
from harness.program.parse import parse

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
    "program": (PATTERNS, None),  # the case gives its own `program` (DESIGN §7)
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

KEYS = (
    "pattern", "style", "dtype", "weight_dtype", "cast", "shape", "layout",
    "affine", "eps", "groups", "input", "params", "seed",
)
# The keys of a program case (DESIGN §7); a catalog case's normalised form has none of them,
# so its case_id is what it was before programs existed.
PROGRAM_KEYS = ("program", "inputs", "param_shapes")
EXTRA_INPUTS = ("y", "r")       # the extra inputs a program may read
PROGRAM_PARAMS = ("w", "b", "s")  # the parameters a program may read


class SpecError(ValueError):
    """A bad spec; the message is one line naming the key."""


def _fail(key: str, problem: str):
    raise SpecError(f"spec key {key!r}: {problem}")


def _choice(key: str, value: Any, allowed) -> str:
    if not isinstance(value, str):
        _fail(key, f"expected a string, got {type(value).__name__} {value!r}")
    if value not in allowed:
        _fail(key, f"unknown value {value!r}; expected one of {', '.join(allowed)}")
    return value


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(key, f"expected a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        _fail(key, f"expected a finite number, got {value!r}")
    return value


def _int(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(key, f"expected an integer, got {type(value).__name__} {value!r}")
    return value


def _kinded(key: str, value: Any, kinds: dict[str, dict[str, float]], ranges=None) -> dict:
    if not isinstance(value, dict):
        _fail(key, f"expected an object like {{\"kind\": ...}}, got {value!r}")
    if "kind" not in value:
        _fail(key, "missing \"kind\"")
    kind = _choice(f"{key}.kind", value["kind"], tuple(kinds))
    out: dict[str, Any] = {"kind": kind}
    for name in value:
        if name != "kind" and name not in kinds[kind]:
            known = ", ".join(kinds[kind]) or "none"
            _fail(f"{key}.{name}", f"unknown parameter for kind {kind!r} (known: {known})")
    for name, default in kinds[kind].items():
        out[name] = _number(f"{key}.{name}", value.get(name, default))
    for name, (low, high) in (ranges or {}).get(kind, {}).items():
        if not low <= out[name] <= high:
            _fail(f"{key}.{name}", f"must be in [{low:g}, {high:g}] for kind {kind!r}, got {out[name]!r}")
    if kind == "uniform" and out["low"] > out["high"]:
        _fail(f"{key}.low", f"low {out['low']!r} is above high {out['high']!r}")
    return out


# Parameter ranges outside of which an input kind means nothing (or overflows float64).
_BIG = 1e30
_RANGES: dict[str, dict[str, tuple[float, float]]] = {
    "normal": {"std": (0.0, _BIG), "mean": (-_BIG, _BIG)},
    "alternating": {"amplitude": (-_BIG, _BIG), "offset": (-_BIG, _BIG)},
    "uniform": {"low": (-_BIG, _BIG), "high": (-_BIG, _BIG)},
    "constant": {"value": (-_BIG, _BIG)},
    "outlier": {"std": (0.0, _BIG), "scale": (0.0, _BIG)},
    "offset": {"offset": (-_BIG, _BIG), "std": (0.0, _BIG)},
    "overflow": {"magnitude": (0.0, _BIG)},
    "tiny": {"scale": (0.0, _BIG)},
    "subnormal": {"fraction": (0.0, 1.0)},
}


def _program_case(dtype, weight_dtype, shape, extra_inputs, eps, param_shapes) -> ProgramCase:
    defaults = {n: (shape[-1],) for n in PROGRAM_PARAMS}
    return ProgramCase(dtype=dtype, weight_dtype=weight_dtype, shape=tuple(shape), extra_inputs=tuple(extra_inputs),
                       param_shapes={**defaults, **param_shapes}, eps=eps)


def program_case(spec: "CaseSpec") -> ProgramCase:
    """What the program language needs to know of a program case."""
    return _program_case(spec.dtype, spec.weight_dtype, spec.shape, tuple(n for n, _ in spec.inputs),
                         spec.eps, dict(spec.param_shapes))


def _program(raw: dict, dtype: str, weight_dtype: str, shape: tuple[int, ...], eps: float):
    """(normalised source, extra inputs, parameter shapes) of a program case; SpecError when bad.

    The program is parsed and checked against DESIGN §7's list; nothing of it runs.
    """
    source = raw["program"]
    if not isinstance(source, str) or not source.strip():
        _fail("program", "expected the program's source as a non-empty string")
    extra_raw = raw.get("inputs", {})
    if not isinstance(extra_raw, dict):
        _fail("inputs", f"expected an object like {{\"y\": {{\"kind\": ...}}}}, got {extra_raw!r}")
    extra = []
    for name in sorted(extra_raw):
        if name not in EXTRA_INPUTS:
            _fail(f"inputs.{name}", f"unknown extra input; a program may read {', '.join(EXTRA_INPUTS)}")
        extra.append((name, tuple(_kinded(f"inputs.{name}", extra_raw[name], INPUT_KINDS, _RANGES).items())))
    shapes_raw = raw.get("param_shapes", {})
    if not isinstance(shapes_raw, dict):
        _fail("param_shapes", f"expected an object like {{\"w\": [64]}}, got {shapes_raw!r}")
    for name, dims in shapes_raw.items():
        if name not in PROGRAM_PARAMS:
            _fail(f"param_shapes.{name}", f"unknown parameter; a program may read {', '.join(PROGRAM_PARAMS)}")
        if not isinstance(dims, list) or not dims or any(isinstance(d, bool) or not isinstance(d, int) or d < 1
                                                         for d in dims):
            _fail(f"param_shapes.{name}", f"expected a non-empty list of positive ints, got {dims!r}")
        if math.prod(dims) > 2**24:
            _fail(f"param_shapes.{name}", f"{math.prod(dims)} elements is over the 16M limit")
    case = _program_case(dtype, weight_dtype, shape, tuple(n for n, _ in extra), eps,
                         {k: tuple(v) for k, v in shapes_raw.items()})
    try:
        program = parse(source, case=case)
    except ProgramError as exc:
        raise SpecError(f"spec key 'program': {exc}") from None
    unread = sorted(set(shapes_raw) - set(program.reads))
    if unread:
        _fail(f"param_shapes.{unread[0]}", "the program does not read this parameter")
    unread = [n for n, _ in extra if n not in program.reads]
    if unread:
        _fail(f"inputs.{unread[0]}", "the program does not read this input")
    pshapes = tuple((n, tuple(case.param_shapes[n])) for n in PROGRAM_PARAMS if n in program.reads)
    return program.source, tuple(extra), pshapes


@dataclass(frozen=True)
class CaseSpec:
    """One normalised case. Build it with `CaseSpec.from_dict`."""

    pattern: str
    style: str
    dtype: str
    weight_dtype: str
    cast: str | None
    shape: tuple[int, ...]
    layout: str
    affine: str
    eps: float
    groups: int
    input: tuple[tuple[str, Any], ...]
    params: tuple[tuple[str, Any], ...]
    seed: int
    program: str | None = None                                   # normalised source, or None
    inputs: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()  # extra inputs: name -> input object
    param_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()     # every parameter the program reads

    # -- construction -----------------------------------------------------
    @classmethod
    def from_dict(cls, raw: Any) -> "CaseSpec":
        if isinstance(raw, CaseSpec):
            return raw
        if not isinstance(raw, dict):
            raise SpecError(f"spec: expected a JSON object, got {type(raw).__name__}")
        for key in raw:
            if key not in KEYS + PROGRAM_KEYS:
                _fail(key, f"unknown key (known: {', '.join(KEYS + PROGRAM_KEYS)})")
        for key in ("pattern", "dtype", "shape"):
            if key not in raw:
                _fail(key, "required key is missing")
        pattern = _choice("pattern", raw["pattern"], PATTERNS)
        is_program = "program" in raw
        style = _choice("style", raw.get("style", "program" if is_program else "module"), tuple(STYLES))
        if is_program != (style == "program"):
            _fail("style", "'program' is the style of a case that gives a program, and only of one")
        for key in ("inputs", "param_shapes"):
            if key in raw and not is_program:
                _fail(key, "only a program case (with a 'program' key) takes it")
        if is_program:
            for key in ("cast", "affine", "groups"):
                if key in raw:
                    _fail(key, "a program writes its own casts, parameters and groups")
        style_patterns, default_cast = STYLES[style]
        if pattern not in style_patterns:
            _fail("style", f"{style!r} is not a style of {pattern!r}")
        dtype = _choice("dtype", raw["dtype"], DTYPES)
        weight_dtype = _choice("weight_dtype", raw.get("weight_dtype", dtype), DTYPES)
        if weight_dtype not in (dtype, "float32"):
            _fail("weight_dtype", f"must be the activation dtype or float32, got {weight_dtype!r} under {dtype!r}")

        cast = raw.get("cast", default_cast)
        if cast is not None:
            cast = _choice("cast", cast, CASTS)
            if default_cast is None:
                _fail("cast", f"style {style!r} writes no casts")

        shape = raw["shape"]
        if not isinstance(shape, list) or not shape:
            _fail("shape", f"expected a non-empty list of ints, got {shape!r}")
        shape = tuple(_int("shape", d) for d in shape)
        if any(d < 1 for d in shape):
            _fail("shape", f"every dimension must be >= 1, got {list(shape)}")
        if math.prod(shape) > 2**24:
            _fail("shape", f"{math.prod(shape)} elements is over the 16M limit")
        if is_program:
            pass  # the program's own reductions say which dims it needs (checked below)
        elif pattern in ("group_norm", "instance_norm", "batch_norm") and len(shape) < 2:
            _fail("shape", f"{pattern} needs (N, C, ...) with at least 2 dimensions")
        if pattern == "instance_norm" and not 3 <= len(shape) <= 5:
            _fail("shape", f"instance_norm needs 3 to 5 dimensions (N, C, L...), got {len(shape)}")
        if pattern == "batch_norm" and len(shape) > 5:
            _fail("shape", f"batch_norm takes 2 to 5 dimensions, got {len(shape)}")

        layout = _choice("layout", raw.get("layout", "contiguous"), LAYOUTS)
        if layout == "channels_last" and len(shape) != 4:
            _fail("layout", f"channels_last needs a 4-D shape, got {len(shape)}-D")

        default_affine = "none" if is_program else "weight" if pattern == "rms_norm" else "weight_bias"
        affine = _choice("affine", raw.get("affine", default_affine), AFFINES)
        if pattern == "rms_norm" and affine == "weight_bias":
            _fail("affine", "rms_norm has no bias; use 'none' or 'weight'")
        if pattern in ("group_norm", "instance_norm", "batch_norm") and affine == "weight":
            _fail("affine", f"torch's {pattern} module has weight and bias together; use 'none' or 'weight_bias'")

        eps = _number("eps", raw.get("eps", 1e-6 if pattern == "rms_norm" else 1e-5))
        if eps < 0:
            _fail("eps", f"must be >= 0, got {eps!r}")

        groups = _int("groups", raw.get("groups", 1))
        if pattern != "group_norm" and "groups" in raw and groups != 1:
            _fail("groups", f"only group_norm takes groups, not {pattern}")
        if groups < 1:
            _fail("groups", f"must be >= 1, got {groups}")
        if is_program:
            pass
        elif pattern == "group_norm" and shape[1] % groups:
            _fail("groups", f"{groups} groups do not divide {shape[1]} channels")
        spatial = math.prod(shape[2:])
        if not is_program and pattern == "group_norm" and shape[0] * (shape[1] // groups) * spatial < 2:
            _fail("shape", "group_norm needs more than one value per group over the batch (torch refuses)")
        if not is_program and pattern == "instance_norm" and spatial < 2:
            _fail("shape", "instance_norm needs more than one spatial element (torch refuses)")

        inp = _kinded("input", raw.get("input", {"kind": "normal"}), INPUT_KINDS, _RANGES)
        params = _kinded("params", raw.get("params", {"kind": "ones"}), PARAM_KINDS)
        seed = _int("seed", raw.get("seed", 0))
        if not 0 <= seed < 2**63:
            _fail("seed", f"must be in [0, 2**63), got {seed}")

        program = extra = pshapes = None
        if is_program:
            program, extra, pshapes = _program(raw, dtype, weight_dtype, shape, eps)
        return cls(
            pattern=pattern, style=style, dtype=dtype, weight_dtype=weight_dtype,
            cast=cast, shape=shape, layout=layout, affine=affine, eps=eps,
            groups=groups, input=tuple(inp.items()), params=tuple(params.items()),
            seed=seed, program=program, inputs=extra or (), param_shapes=pshapes or (),
        )

    @classmethod
    def from_json(cls, text: str) -> "CaseSpec":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(f"spec: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
        return cls.from_dict(raw)

    # -- views ------------------------------------------------------------
    @property
    def input_dict(self) -> dict[str, Any]:
        return dict(self.input)

    @property
    def params_dict(self) -> dict[str, Any]:
        return dict(self.params)

    @property
    def inputs_dict(self) -> dict[str, dict[str, Any]]:
        """The extra inputs a program reads: name -> input object."""
        return {name: dict(kind) for name, kind in self.inputs}

    @property
    def param_shapes_dict(self) -> dict[str, tuple[int, ...]]:
        return dict(self.param_shapes)

    def to_dict(self) -> dict[str, Any]:
        """The normalised spec as a JSON-able dict, keys in DESIGN order (program keys only for programs)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in PROGRAM_KEYS and self.program is None:
                continue
            if self.program is not None and (f.name in ("cast", "affine", "groups")
                                             or (f.name == "inputs" and not value)):
                continue  # a program writes its own casts, parameters and groups
            if f.name == "shape":
                value = list(value)
            elif f.name in ("input", "params"):
                value = dict(value)
            elif f.name == "inputs":
                value = self.inputs_dict
            elif f.name == "param_shapes":
                value = {k: list(v) for k, v in value}
            out[f.name] = value
        return out

    def to_json(self) -> str:
        """Canonical JSON: the same bytes for the same spec everywhere."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @property
    def case_id(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:12]

    def structure_key(self) -> str:
        """What a compiled artifact depends on: the spec minus its input.

        The seed is dropped too unless it draws the parameters (params
        kind "normal"), since compiled paths embed parameters as constants.
        """
        d = self.to_dict()
        d.pop("input")
        if "inputs" in d:  # which extra inputs there are shapes the module; their values do not
            d["inputs"] = sorted(d["inputs"])
        if d["params"]["kind"] == "ones":
            d.pop("seed")
        return hashlib.sha256(json.dumps(d, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:12]

    def replace(self, **changes) -> "CaseSpec":
        """A new spec with `changes`; a weight dtype that followed dtype keeps following it."""
        d = self.to_dict()
        if "dtype" in changes and "weight_dtype" not in changes and self.weight_dtype == self.dtype:
            d["weight_dtype"] = changes["dtype"]
        d.update(changes)
        return CaseSpec.from_dict(d)

    def __str__(self) -> str:
        inp = self.input_dict
        kind = inp.pop("kind")
        detail = ",".join(f"{k}={v:g}" for k, v in inp.items())
        parts = [self.pattern, self.style, self.dtype]
        if self.program is not None:
            parts[1] = f"program[{hashlib.sha256(self.program.encode()).hexdigest()[:6]}]"
        if self.weight_dtype != self.dtype:
            parts.append(f"w={self.weight_dtype}")
        if self.cast:
            parts.append(f"cast={self.cast}")
        parts.append("x".join(map(str, self.shape)))
        if self.layout != "contiguous":
            parts.append(self.layout)
        parts.append(f"{kind}({detail})")
        return " ".join(parts)


def load_spec_file(path: str) -> list[CaseSpec]:
    """Specs from a file: one JSON object, a JSON list, or JSON lines."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        try:
            raw = json.loads(text)
            items = raw if isinstance(raw, list) else [raw]
        except json.JSONDecodeError:
            items = []
            for n, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        items.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise SpecError(f"line {n}: not valid JSON ({exc.msg})") from None
        if not items:
            raise SpecError("no spec in the file")
        return [CaseSpec.from_dict(item) for item in items]
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None
