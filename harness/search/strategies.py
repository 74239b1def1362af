"""Hypothesis strategies for case specs, for `normdiff fuzz` and your own `@given` tests.

    from hypothesis import given
    from harness.search.strategies import case_specs

    @given(case_specs(patterns=["rms_norm"], dtypes=["float16"]))
    def test_my_path(spec): ...

Every drawn spec is built with `CaseSpec.from_dict`, valid by construction,
and covers every docs/contracts.md §1 dimension: pattern and style, dtype and weight
dtype, cast, shape, layout, affine, eps, groups, input kind and its
parameters, params kind, seed.

Why the draws look the way they do:

- Hypothesis shrinks a `sampled_from`/`integers` choice toward its first
  value, so every list below starts with the simplest choice (the default
  style, cast, affine and eps; the `normal` input with mean 0 and std 1;
  seed 0; size-1 dimensions). A shrunk failure therefore reads like a
  hand-written minimal case.
- Choices are weighted by repeating entries, so the search spends most of its
  examples on the adversarial input kinds (every kind but normal and
  uniform) and on float16/bfloat16, while still shrinking to `normal`.
- A row length is drawn below a cap 2**e: about log-uniform coverage from 1
  to `max_row` elements (accumulation bugs need long rows, indexing bugs
  short ones), and it shrinks to the exact length where a failure starts.
- Every dimension is bounded by what the earlier ones left of
  `max_elements`, so no example is rejected and executions stay fast.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from hypothesis import strategies as st

from harness.core.dtypes import DTYPES
from harness.core.eps import SPEC_RMS_EPS, TORCH_NORM_EPS, spec_eps
from harness.spec import AFFINES, CASTS, CATALOG_STYLES, INPUT_KINDS, PATTERNS, STYLES, CaseSpec

# (pattern, style) pairs, simplest first; drawn uniformly, so every way a
# model writes a norm gets as many examples as the plain modules.
PAIRS: tuple[tuple[str, str], ...] = tuple(
    [(p, "module") for p in PATTERNS]
    + [(p, s) for s in CATALOG_STYLES if s != "module" for p in STYLES[s][0]]
)

# Input kinds in shrink order (simplest first) with their search weights; a
# kind added to the spec later joins at the end with weight 2 and its defaults.
_KNOWN_ORDER = ("normal", "uniform", "constant", "alternating", "offset", "outlier", "overflow", "tiny",
                "subnormal")
INPUT_ORDER = tuple(k for k in _KNOWN_ORDER if k in INPUT_KINDS) + tuple(
    k for k in INPUT_KINDS if k not in _KNOWN_ORDER)
INPUT_WEIGHTS = {k: {"normal": 2, "uniform": 1, "constant": 1}.get(k, 2) for k in INPUT_ORDER}
SIMPLE_INPUTS = ("normal", "uniform", "constant", "alternating")
BENIGN_INPUTS = ("normal", "uniform")
ADVERSARIAL_INPUTS = tuple(k for k in INPUT_ORDER if k not in BENIGN_INPUTS)

# Parameter values per kind, first = default/simplest. Each list spans the
# regimes that kind stresses (conditioning |mean|/std, overflow of squares,
# subnormals), by orders of magnitude.
_PARAMS: dict[str, dict[str, tuple[float, ...]]] = {
    "normal": {"mean": (0.0, 1.0, -3.0, 10.0, 100.0, 1000.0), "std": (1.0, 0.1, 0.001, 10.0, 100.0)},
    "alternating": {"amplitude": (1.0, 0.25, 0.01, 100.0), "offset": (0.0, 1.0, 10.0, 100.0, 1000.0)},
    "constant": {"value": (1.0, 0.0, -2.5, 1000.0, 0.001)},
    "outlier": {"std": (1.0, 0.1), "scale": (100.0, 10.0, 1000.0, 10000.0)},
    "offset": {"offset": (1000.0, 10.0, 100.0, 10000.0), "std": (1.0, 0.1, 0.01)},
    "overflow": {"magnitude": (300.0, 100.0, 1000.0, 30000.0)},
    "tiny": {"scale": (1e-6, 1e-4, 1e-8, 1e-3)},
    "subnormal": {"fraction": (1.0, 0.5, 0.1)},
}
_UNIFORM_RANGES = ((-1.0, 1.0), (0.0, 1.0), (-100.0, 100.0), (0.0, 1000.0), (999.0, 1001.0))
# Well-conditioned parameters only: what "benign" means for --inputs benign.
_BENIGN_PARAMS = {"normal": {"mean": (0.0,), "std": (1.0, 0.5, 2.0, 0.1, 10.0)}}
_BENIGN_UNIFORM = ((-1.0, 1.0), (0.0, 1.0), (-10.0, 10.0))

_LCM = 60  # every parameter list has 1 to 6 values; an index mod its length is uniform

INPUT_GROUPS = {"benign": BENIGN_INPUTS, "adversarial": ADVERSARIAL_INPUTS, "all": INPUT_ORDER}

_EPS_OTHER = (TORCH_NORM_EPS, SPEC_RMS_EPS, 1e-12, 0.0, 1e-3, 0.1)

# A gradient case ("grad": true, docs/gradients.md) for one draw in GRAD_SHARE, read off the drawn seed rather
# than drawn: the forward cases' choices, and so a seeded search's forward cases, are what they were, one in
# GRAD_SHARE of them asking for its backward instead; a seed shrinks toward 0, a forward case.
GRAD_SHARE = 4


def is_grad(seed: int, grad: bool | None) -> bool:
    """Whether a draw with this seed is a gradient case: `grad` True or False fixes it, None reads the seed."""
    return seed % GRAD_SHARE == GRAD_SHARE - 1 if grad is None else grad


@dataclass(frozen=True)
class Batch:
    """One draw of `normdiff fuzz`: cases of one structure (a path compiles once for all of them) and, for
    drawn programs, the key of the skeleton they were rendered from (harness.search.programs.Skeleton)."""

    specs: tuple[CaseSpec, ...]
    skeleton: str | None = None

    @classmethod
    def of(cls, spec: CaseSpec) -> "Batch":
        return cls((spec,))


def _weighted(options) -> st.SearchStrategy:
    """Pick from (value, weight) pairs; shrinks toward the first value."""
    flat = [v for v, w in options for _ in range(w)]
    return st.sampled_from(flat)


def _pow2ish(upper: int, emax: int | None = None) -> st.SearchStrategy[int]:
    """An int in [1, upper], about log-uniform: a cap 2**e, then a value up to it.

    Shrinking binary-searches the value below its cap, so a failure that
    starts at some row length shrinks to exactly that length.
    """
    top = int(math.log2(upper)) if emax is None else min(emax, int(math.log2(upper)))

    @st.composite
    def draw_it(draw):
        e = draw(st.integers(0, top))
        return draw(st.integers(1, min(2 ** e, upper)))

    return draw_it()


def _small(upper: int, cap: int) -> st.SearchStrategy[int]:
    """A small dimension in [1, min(cap, upper)]."""
    return st.integers(1, max(1, min(cap, upper)))


# -- input kinds -------------------------------------------------------------

def resolve_inputs(names) -> dict[str, bool]:
    """Input kind -> benign-only, from kind names and group names (benign, adversarial, all).

    A kind named on its own gets its full parameter range; `benign` adds
    normal and uniform with well-conditioned parameters only.
    """
    if names is None:
        names = ["all"]
    if isinstance(names, str):
        names = [names]
    out: dict[str, bool] = {}
    for name in names:
        if name == "benign":
            for kind in BENIGN_INPUTS:
                out.setdefault(kind, True)
        elif name in INPUT_GROUPS:
            for kind in INPUT_GROUPS[name]:
                out[kind] = False
        elif name in INPUT_KINDS:
            out[name] = False
        else:
            known = ", ".join(list(INPUT_GROUPS) + list(INPUT_ORDER))
            raise ValueError(f"unknown input kind or group {name!r}; known: {known}")
    return {k: out[k] for k in INPUT_ORDER if k in out}


def input_specs(kinds=None) -> st.SearchStrategy[dict]:
    """An `input` object (docs/contracts.md §1) of the given kinds/groups (default: all)."""
    return _input_strategy(resolve_inputs(kinds))


def _input_strategy(table: dict[str, bool]) -> st.SearchStrategy[dict]:
    options = [(k, INPUT_WEIGHTS[k]) for k in table]

    @st.composite
    def draw_it(draw):
        kind = draw(_weighted(options))
        # Every kind makes the same two choices (indices, 0 = default), so a
        # shrink from an adversarial kind to `normal` is one smaller choice.
        picks = [draw(st.integers(0, _LCM - 1)) for _ in range(2)]
        benign = table[kind]
        out: dict = {"kind": kind}
        if kind == "uniform":
            ranges = _BENIGN_UNIFORM if benign else _UNIFORM_RANGES
            low, high = ranges[picks[0] % len(ranges)]
            out.update(low=low, high=high)
            return out
        params = _BENIGN_PARAMS.get(kind) if benign else _PARAMS.get(kind)
        if params is None:  # a kind this module does not know yet: its defaults
            params = {name: (value,) for name, value in INPUT_KINDS[kind].items()}
        for pick, (name, values) in zip(picks, params.items()):
            out[name] = values[pick % len(values)]
        return out

    return draw_it()


# -- shapes ------------------------------------------------------------------

def _shape(draw, pattern: str, max_row: int, max_elements: int) -> tuple[list[int], int]:
    """(shape, groups) for `pattern`, at most `max_elements` elements."""
    if pattern in ("layer_norm", "rms_norm"):
        n = draw(_pow2ish(min(max_row, max_elements)))
        leading = draw(st.integers(0, 3))
        left = max_elements // n
        dims = []
        for _ in range(leading):
            d = draw(_small(left, 4))
            dims.append(d)
            left //= d
        return dims + [n], 1
    if pattern == "group_norm":
        # torch's group_norm refuses a batch of groups holding one value in all
        # ((N * C/G) * spatial == 1), so such a case gets a spatial dim of 2+.
        groups = draw(st.integers(1, min(8, max_elements // 2)))
        per_group = draw(_small(max_elements // (2 * groups), 8))
        batch = draw(_small(max_elements // (2 * groups * per_group), 4))
        channels = groups * per_group
        return [batch, channels] + _spatial(draw, max_elements // (batch * channels), 0, 6,
                                            need_two=batch * per_group == 1), groups
    # instance_norm: 3..5 dims, at least 2 spatial values (torch refuses 1);
    # batch_norm: 2..5 dims
    instance = pattern == "instance_norm"
    batch = draw(_small(max_elements // 2, 4 if instance else 8))
    channels = draw(_small(max_elements // (2 * batch), 16))
    return [batch, channels] + _spatial(draw, max_elements // (batch * channels), 1 if instance else 0, 7,
                                        need_two=instance), 1


def _spatial(draw, left: int, low: int, emax: int, need_two: bool) -> list[int]:
    """Spatial dims with at most `left` elements in all; `need_two`: at least 2 of them."""
    count = draw(st.integers(1 if need_two else low, 3))
    dims = []
    for i in range(count):
        if i == 0 and need_two:
            d = 1 + draw(_pow2ish(max(1, left // 2), emax=emax))  # 2 .. left
        else:
            d = draw(_pow2ish(max(1, left), emax=emax))
        dims.append(d)
        left = max(1, left // d)
    return dims


def row_length(spec: CaseSpec) -> int:
    """Elements one normalization row's statistics are taken over."""
    shape = spec.shape
    if spec.pattern in ("layer_norm", "rms_norm"):
        return shape[-1]
    spatial = math.prod(shape[2:])
    if spec.pattern == "group_norm":
        return shape[1] // spec.groups * spatial
    if spec.pattern == "instance_norm":
        return spatial
    return shape[0] * spatial  # batch_norm: a channel across the batch


# -- the spec ----------------------------------------------------------------

def _check(name: str, given, allowed) -> tuple:
    if given is None:
        return tuple(allowed)
    if isinstance(given, str):
        given = [given]
    given = tuple(given)
    for g in given:
        if g not in allowed:
            raise ValueError(f"{name}: unknown value {g!r}; known: {', '.join(allowed)}")
    if not given:
        raise ValueError(f"{name}: no value given")
    return given


def case_specs(*, patterns=None, styles=None, dtypes=None, input_kinds=None, layouts=None, max_row: int = 8192,
               max_elements: int = 65536, grad: bool | None = None) -> st.SearchStrategy[CaseSpec]:
    """Valid `CaseSpec`s, optionally restricted.

    patterns, styles, dtypes, layouts: lists of allowed values (default all).
    grad: None makes one case in GRAD_SHARE a gradient case (is_grad), True every one, False none.
    input_kinds: input kind names and/or groups "benign", "adversarial", "all".
    max_row: longest layer/rms row; max_elements: largest input.
    Raises ValueError (one line) when a restriction is unknown or leaves nothing.
    """
    patterns = _check("patterns", patterns, PATTERNS)
    styles = _check("styles", styles, CATALOG_STYLES)
    dtypes = _check("dtypes", dtypes, DTYPES)
    layouts = _check("layouts", layouts, ("contiguous", "channels_last"))
    kinds = resolve_inputs(input_kinds)
    if max_row < 1:
        raise ValueError(f"max_row must be >= 1, got {max_row}")
    if max_elements < 16:
        raise ValueError(f"max_elements must be >= 16, got {max_elements}")
    if max_elements > 2 ** 24:
        raise ValueError(f"max_elements is over the 16M spec limit: {max_elements}")
    pairs = [(p, s) for p, s in PAIRS if p in patterns and s in styles]
    if not pairs:
        raise ValueError(f"no style of {', '.join(patterns)} among {', '.join(styles)}")
    if layouts == ("channels_last",):
        raise ValueError("layouts: channels_last alone is impossible for 2-D and 3-D shapes; add contiguous")
    dtype_options = [(d, 1 if d == "float32" else 2) for d in DTYPES if d in dtypes]
    input_strategy = _input_strategy(kinds)

    @st.composite
    def draw_spec(draw) -> CaseSpec:
        pattern, style = draw(st.sampled_from(pairs))
        dtype = draw(_weighted(dtype_options))
        # The weight-dtype and cast choices are drawn for every spec (and
        # ignored where they do not apply) so specs of every style make the
        # same choices: a shrink from one style to a simpler one then lines up.
        weight_dtype = draw(_weighted([("same", 3), ("float32", 1)]))
        cast = draw(_weighted([("default", 3)] + [(c, 1) for c in CASTS]))
        raw: dict = {"pattern": pattern, "style": style, "dtype": dtype}
        if dtype != "float32" and weight_dtype == "float32":
            raw["weight_dtype"] = "float32"
        default_cast = STYLES[style][1]
        if default_cast is not None and cast != "default":
            raw["cast"] = cast
        shape, groups = _shape(draw, pattern, max_row, max_elements)
        raw["shape"] = shape
        if pattern == "group_norm":
            raw["groups"] = groups
        channels_last = draw(_weighted([(False, 2), (True, 1)])) if "channels_last" in layouts else False
        if len(shape) == 4 and channels_last:
            raw["layout"] = "channels_last"
        default_affine = "weight" if pattern == "rms_norm" else "weight_bias"
        allowed = [a for a in AFFINES if not (pattern == "rms_norm" and a == "weight_bias")
                   and not (pattern in ("group_norm", "instance_norm", "batch_norm") and a == "weight")]
        raw["affine"] = draw(_weighted([(default_affine, 3)] + [(a, 1) for a in allowed if a != default_affine]))
        default_eps = spec_eps(pattern)
        raw["eps"] = draw(_weighted([(default_eps, 4)] + [(e, 1) for e in _EPS_OTHER if e != default_eps]))
        raw["input"] = draw(input_strategy)
        raw["params"] = {"kind": draw(st.sampled_from(("ones", "normal")))}
        raw["seed"] = draw(st.integers(0, 2 ** 31 - 1))
        if is_grad(raw["seed"], grad):
            raw["grad"] = True
        return CaseSpec.from_dict(raw)

    return draw_spec()


def in_space(spec: CaseSpec, *, patterns=None, styles=None, dtypes=None, input_kinds=None, layouts=None,
             max_row: int = 8192, max_elements: int = 65536) -> bool:
    """Whether `case_specs` with these restrictions could draw `spec` (its pattern, style,
    dtype, input kind and size); for a spec found by an earlier, wider search."""
    kinds = resolve_inputs(input_kinds)
    inp = spec.input_dict
    if spec.pattern not in (patterns or PATTERNS) or spec.style not in (styles or STYLES):
        return False
    if spec.dtype not in (dtypes or DTYPES) or spec.layout not in (layouts or ("contiguous", "channels_last")):
        return False
    if inp["kind"] not in kinds:
        return False
    if kinds[inp["kind"]]:  # benign only: the well-conditioned parameters
        if inp["kind"] == "uniform":
            if (inp["low"], inp["high"]) not in _BENIGN_UNIFORM:
                return False
        elif any(inp[k] not in v for k, v in _BENIGN_PARAMS.get(inp["kind"], {}).items()):
            return False
    if spec.pattern in ("layer_norm", "rms_norm") and spec.shape[-1] > max_row:
        return False
    return math.prod(spec.shape) <= max_elements
