"""The case spec (docs/contracts.md §1): one norm, one style, dtype, layout, cast, input.

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
from functools import cached_property
from typing import Any

from harness.core.dtypes import DTYPES
from harness.core.eps import spec_eps
from harness.spec.keys import (
    AFFINES, CASTS, INPUT_KINDS, KEYS, LAYOUTS, PARAM_KINDS, PATTERNS, PROGRAM_KEYS, STYLES, RANGES,
    SpecError, choice, fail, integer, kinded, number, x_input,
)
from harness.spec.mode_keys import MODE_KEYS, dynamic_keys, grad_keys, mode_dict
from harness.spec.module_keys import (
    MODULE_KEYS, MODULE_PARAM_KINDS, UNSAID_PATTERN, check_module_raw, class_name, init_json, instance_path,
    module_inputs,
)
from harness.spec.program_keys import _program, parsed_program, program_params


def _shape(shape) -> tuple[int, ...]:
    if not isinstance(shape, list) or not shape:
        fail("shape", f"expected a non-empty list of ints, got {shape!r}")
    shape = tuple(integer("shape", d) for d in shape)
    if any(d < 1 for d in shape):
        fail("shape", f"every dimension must be >= 1, got {list(shape)}")
    if math.prod(shape) > 2**24:
        fail("shape", f"{math.prod(shape)} elements is over the 16M limit")
    return shape


def _seed(value) -> int:
    seed = integer("seed", value)
    if not 0 <= seed < 2**63:
        fail("seed", f"must be in [0, 2**63), got {seed}")
    return seed


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
    cls: str | None = None   # a module case (docs/contracts.md §8): "package.module:ClassName", its `class` key
    init: str | None = None  # a module case: the constructor's keyword arguments, canonical JSON
    instance: str | None = None  # a module case: the submodule of the built model under test (its module path)
    # the mode keys (harness.spec.mode_keys): the backward asked for, its cotangent; the dims compiled symbolic
    grad: bool = False
    cotangent: tuple[tuple[str, Any], ...] = ()
    dynamic: tuple[int, ...] = ()
    dynamic_max: int | None = None

    # -- construction -----------------------------------------------------
    @classmethod
    def from_dict(cls, raw: Any) -> "CaseSpec":
        if isinstance(raw, CaseSpec):
            return raw
        if not isinstance(raw, dict):
            raise SpecError(f"spec: expected a JSON object, got {type(raw).__name__}")
        for key in raw:
            if key not in KEYS + PROGRAM_KEYS + MODULE_KEYS + MODE_KEYS:
                fail(key, f"unknown key (known: {', '.join(KEYS + PROGRAM_KEYS + MODULE_KEYS + MODE_KEYS)})")
        if "class" in raw:
            return cls._module(raw)
        for key in ("pattern", "dtype", "shape"):
            if key not in raw:
                fail(key, "required key is missing")
        is_program = "program" in raw
        pattern = choice("pattern", raw["pattern"], PATTERNS + ((UNSAID_PATTERN,) if is_program else ()))
        style = choice("style", raw.get("style", "program" if is_program else "module"), tuple(STYLES))
        if is_program != (style == "program"):
            fail("style", "'program' is the style of a case that gives a program, and only of one")
        if "instance" in raw:
            fail("instance", "only a module case (with a 'class' key) names an instance of its model")
        for key in ("inputs", "param_shapes"):
            if key in raw and not is_program:
                fail(key, "only a program case (with a 'program' key) takes it")
        if is_program:
            for key in ("cast", "affine", "groups"):
                if key in raw:
                    fail(key, "a program writes its own casts, parameters and groups")
        style_patterns, default_cast = STYLES[style]
        if pattern not in style_patterns and not (is_program and pattern == UNSAID_PATTERN):
            fail("style", f"{style!r} is not a style of {pattern!r}")
        dtype = choice("dtype", raw["dtype"], DTYPES)
        weight_dtype = choice("weight_dtype", raw.get("weight_dtype", dtype), DTYPES)
        if weight_dtype not in (dtype, "float32"):
            fail("weight_dtype", f"must be the activation dtype or float32, got {weight_dtype!r} under {dtype!r}")

        cast = raw.get("cast", default_cast)
        if cast is not None:
            cast = choice("cast", cast, CASTS)
            if default_cast is None:
                fail("cast", f"style {style!r} writes no casts")

        shape = _shape(raw["shape"])
        if is_program:
            pass  # the program's own reductions say which dims it needs (checked below)
        elif pattern in ("group_norm", "instance_norm", "batch_norm") and len(shape) < 2:
            fail("shape", f"{pattern} needs (N, C, ...) with at least 2 dimensions")
        if pattern == "instance_norm" and not 3 <= len(shape) <= 5:
            fail("shape", f"instance_norm needs 3 to 5 dimensions (N, C, L...), got {len(shape)}")
        if pattern == "batch_norm" and len(shape) > 5:
            fail("shape", f"batch_norm takes 2 to 5 dimensions, got {len(shape)}")

        layout = choice("layout", raw.get("layout", "contiguous"), LAYOUTS)
        if layout == "channels_last" and len(shape) != 4:
            fail("layout", f"channels_last needs a 4-D shape, got {len(shape)}-D")

        default_affine = "none" if is_program else "weight" if pattern == "rms_norm" else "weight_bias"
        affine = choice("affine", raw.get("affine", default_affine), AFFINES)
        if pattern == "rms_norm" and affine == "weight_bias":
            fail("affine", "rms_norm has no bias; use 'none' or 'weight'")
        if pattern in ("group_norm", "instance_norm", "batch_norm") and affine == "weight":
            fail("affine", f"torch's {pattern} module has weight and bias together; use 'none' or 'weight_bias'")

        eps = number("eps", raw.get("eps", spec_eps(pattern)))
        if eps < 0:
            fail("eps", f"must be >= 0, got {eps!r}")

        groups = integer("groups", raw.get("groups", 1))
        if pattern != "group_norm" and "groups" in raw and groups != 1:
            fail("groups", f"only group_norm takes groups, not {pattern}")
        if groups < 1:
            fail("groups", f"must be >= 1, got {groups}")
        if is_program:
            pass
        elif pattern == "group_norm" and shape[1] % groups:
            fail("groups", f"{groups} groups do not divide {shape[1]} channels")
        spatial = math.prod(shape[2:])
        if not is_program and pattern == "group_norm" and shape[0] * (shape[1] // groups) * spatial < 2:
            fail("shape", "group_norm needs more than one value per group over the batch (torch refuses)")
        if not is_program and pattern == "instance_norm" and spatial < 2:
            fail("shape", "instance_norm needs more than one spatial element (torch refuses)")

        inp = x_input("input", raw.get("input", {"kind": "normal"}))
        params = program_params(raw.get("params", {"kind": "ones"})) if is_program else \
            kinded("params", raw.get("params", {"kind": "ones"}), PARAM_KINDS)
        seed = _seed(raw.get("seed", 0))
        grad, cotangent = grad_keys(raw)
        dynamic, dynamic_max = dynamic_keys(raw, shape, None if is_program else pattern)

        parsed = extra = pshapes = None
        if is_program:
            parsed, extra, pshapes = _program(raw, dtype, weight_dtype, shape, eps)
        spec = cls(
            pattern=pattern, style=style, dtype=dtype, weight_dtype=weight_dtype,
            cast=cast, shape=shape, layout=layout, affine=affine, eps=eps,
            groups=groups, input=tuple(inp.items()), params=tuple(params.items()),
            seed=seed, program=parsed.source if parsed is not None else None, inputs=extra or (),
            param_shapes=pshapes or (), grad=grad, cotangent=cotangent, dynamic=dynamic, dynamic_max=dynamic_max,
        )
        spec.__dict__["parsed_program"] = parsed  # parsed and checked above: the cached_property's value
        return spec

    @classmethod
    def _module(cls, raw: dict) -> "CaseSpec":
        """A module case (docs/contracts.md §8): its class named, never imported here."""
        check_module_raw(raw)
        for key in ("dtype", "shape"):
            if key not in raw:
                fail(key, "required key is missing")
        style = choice("style", raw.get("style", "class"), ("class",))
        pattern = choice("pattern", raw.get("pattern", UNSAID_PATTERN), PATTERNS + (UNSAID_PATTERN,))
        dtype = choice("dtype", raw["dtype"], DTYPES)
        weight_dtype = choice("weight_dtype", raw.get("weight_dtype", dtype), DTYPES)
        if weight_dtype not in (dtype, "float32"):
            fail("weight_dtype", f"must be the activation dtype or float32, got {weight_dtype!r} under {dtype!r}")
        shape = _shape(raw["shape"])
        layout = choice("layout", raw.get("layout", "contiguous"), LAYOUTS)
        if layout == "channels_last" and len(shape) != 4:
            fail("layout", f"channels_last needs a 4-D shape, got {len(shape)}-D")
        inp = x_input("input", raw.get("input", {"kind": "normal"}))
        params = kinded("params", raw.get("params", {"kind": "init"}), MODULE_PARAM_KINDS)
        seed = _seed(raw.get("seed", 0))
        grad, cotangent = grad_keys(raw)
        dynamic, dynamic_max = dynamic_keys(raw, shape, None)
        return cls(pattern=pattern, style=style, dtype=dtype, weight_dtype=weight_dtype, cast=None, shape=shape,
                   layout=layout, affine="none", eps=0.0, groups=1, input=tuple(inp.items()),
                   params=tuple(params.items()), seed=seed, inputs=module_inputs(raw.get("inputs", {})),
                   cls=class_name(raw["class"]), init=init_json(raw.get("init", {})),
                   instance=instance_path(raw["instance"]) if "instance" in raw else None, grad=grad,
                   cotangent=cotangent, dynamic=dynamic, dynamic_max=dynamic_max)

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
        out = dict(self.params)
        if "values" in out:  # a program's `fill`: {name: value}
            out["values"] = dict(out["values"])
        return out

    @property
    def inputs_dict(self) -> dict[str, dict[str, Any]]:
        """The extra inputs a program reads: name -> input object."""
        return {name: {k: list(v) if k == "shape" else v for k, v in kind} for name, kind in self.inputs}

    @property
    def param_shapes_dict(self) -> dict[str, tuple[int, ...]]:
        return dict(self.param_shapes)

    @property
    def is_module(self) -> bool:
        """A module case (docs/contracts.md §8): a class from model code, not a catalog style or a program."""
        return self.cls is not None

    @property
    def init_dict(self) -> dict[str, Any]:
        return json.loads(self.init) if self.init is not None else {}

    def to_dict(self) -> dict[str, Any]:
        """The normalised spec as a JSON-able dict, keys in the contracts' order (docs/contracts.md §1) (program keys only for programs)."""
        if self.is_module:
            out = {"pattern": self.pattern, "style": self.style, "class": self.cls, "init": self.init_dict,
                   "dtype": self.dtype, "weight_dtype": self.weight_dtype, "shape": list(self.shape),
                   "layout": self.layout, "input": dict(self.input), "params": self.params_dict, "seed": self.seed}
            if self.inputs:
                out["inputs"] = self.inputs_dict
            if self.instance is not None:  # only when given: every other module case keeps its case_id
                out["instance"] = self.instance
            return {**out, **self.mode_dict}
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name in ("cls", "init", "instance") or f.name in MODE_KEYS:
                continue
            value = getattr(self, f.name)
            if f.name in PROGRAM_KEYS and self.program is None:
                continue
            if self.program is not None and (f.name in ("cast", "affine", "groups")
                                             or (f.name == "inputs" and not value)):
                continue  # a program writes its own casts, parameters and groups
            if f.name == "shape":
                value = list(value)
            elif f.name == "input":
                value = dict(value)
            elif f.name == "params":
                value = self.params_dict
            elif f.name == "inputs":
                value = self.inputs_dict
            elif f.name == "param_shapes":
                value = {k: list(v) for k, v in value}
            out[f.name] = value
        return {**out, **self.mode_dict}

    @property
    def mode_dict(self) -> dict[str, Any]:
        """The mode keys this case asks for (harness.spec.mode_keys): none for a forward, static case."""
        return mode_dict(self.grad, self.cotangent, self.dynamic, self.dynamic_max)

    @property
    def cotangent_dict(self) -> dict[str, Any]:
        return dict(self.cotangent)

    def static(self) -> "CaseSpec":
        """The same case compiled at its own sizes (a symbolic case's static control); itself if static."""
        if not self.dynamic:
            return self
        d = self.to_dict()
        d.pop("dynamic")
        d.pop("dynamic_max")
        return CaseSpec.from_dict(d)

    def to_json(self) -> str:
        """Canonical JSON: the same bytes for the same spec everywhere."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    # -- derived once: a frozen spec's program, id and structure never change (cached in its __dict__) ----
    @cached_property
    def parsed_program(self):
        """The program case's Program (harness.program.ir), parsed and checked once; None for other cases.

        Every consumer (reference, torch module, attribution, repro) takes it
        instead of parsing `program`, the text kept for the record and display.
        """
        return parsed_program(self) if self.program is not None else None

    @cached_property
    def case_id(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:12]

    def structure_key(self) -> str:
        """What a compiled artifact depends on: the spec minus its input (and a gradient case's cotangent).

        The seed is dropped too unless it draws the parameters (params
        kind "normal"), since compiled paths embed parameters as constants.
        The sizes of a symbolic case's dynamic dims are dropped: one compile
        serves every size (docs/contracts.md §1).
        """
        return self._structure_key

    @cached_property
    def _structure_key(self) -> str:
        d = self.to_dict()
        d.pop("input")
        d.pop("cotangent", None)
        if self.dynamic:
            d["shape"] = [None if i in self.dynamic else n for i, n in enumerate(self.shape)]
        if "inputs" in d:  # which extra inputs there are (and their shapes, dtypes) shapes the module; values do not
            d["inputs"] = {name: {k: v for k, v in obj.items() if k in ("shape", "dtype")}
                           for name, obj in d["inputs"].items()}
            if not any(d["inputs"].values()):
                d["inputs"] = sorted(d["inputs"])  # the form of every case before inputs had shapes
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
        detail = ",".join(f"{k}={v[:12]}" if isinstance(v, str) else f"{k}={v:g}" for k, v in inp.items())
        parts = [self.pattern, self.style, self.dtype]
        if self.is_module:
            parts[1] = self.cls.rpartition(":")[2] + (f"[{self.instance}]" if self.instance else "")
        if self.program is not None:
            parts[1] = f"program[{hashlib.sha256(self.program.encode()).hexdigest()[:6]}]"
        if self.weight_dtype != self.dtype:
            parts.append(f"w={self.weight_dtype}")
        if self.cast:
            parts.append(f"cast={self.cast}")
        parts.append("x".join(map(str, self.shape)))
        if self.layout != "contiguous":
            parts.append(self.layout)
        if self.dynamic:
            parts.append(f"dynamic{list(self.dynamic)}")
        if self.grad:
            parts.append("grad")
        parts.append(f"{kind}({detail})")
        return " ".join(parts)
