"""Hypothesis strategies over norm programs (docs/contracts.md §7): canonical norms with a few changes.

    from hypothesis import given
    from harness.search.programs import program_specs

    @given(program_specs(dtypes=["float16"]))
    def test_my_rewrite_keeps_values(spec): ...

A program is drawn as a `Skeleton`: a base style (the canonical program of
the Qwen, Llama, Gemma or T5 RMSNorm, or a float32 layer norm written out)
and one value per mutation axis, the places where pattern matchers go wrong:
which tensor is scaled and which is squared, how the square and the mean are
written, the reduced dims, eps, the root, the weight (side, shape, dtype,
`1 + w`), the casts (widening, narrowing, round trips, `memory_format`), the
context (an op before the norm, an op after it), and the neighbourhood: one of
the context suite's neighbour templates (cases/neighbours.py: a residual add
in three roundings, a second scale, a Linear, a rotary rotate...) around the
mutated norm. `skeleton_source` turns a
skeleton into program text; every value of every axis renders a valid
program for every base, so no example is rejected.

Each axis lists its canonical value first, and hypothesis shrinks a choice
toward the first value, so a shrunk finding is the canonical norm with only
the changes the failure needs: `Skeleton.changes()` says them in words
("qwen: scaled=y"), and that is the skeleton part of a finding's signature.

`normdiff fuzz --programs` draws `program_batches`: one structure (skeleton,
dtypes, shape, parameters: what a path compiles) with up to
INPUTS_PER_STRUCTURE inputs, so a path compiles once for several examples.
A draw returns its skeleton's key beside the specs; the fuzzer, not the
strategy, remembers which program came from which skeleton.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, fields

from hypothesis import strategies as st

from harness.core.dtypes import DTYPES
from harness.spec import CaseSpec
from harness.search.strategies import Batch, _pow2ish, _weighted, input_specs, is_grad
from cases import neighbours

BASES = ("qwen", "llama", "gemma", "t5", "layer")
# Inputs drawn per structure (1 to this many, about half on average): a path compiles once for
# the batch, so an example costs a compile only once in a few; a finding is the batch's one example
# that shows it.
INPUTS_PER_STRUCTURE = 8

# axis -> its values, canonical first (hypothesis shrinks toward it)
AXES: dict[str, tuple[str, ...]] = {
    "upcast": ("base", "to", "float", "to_contiguous", "none", "half"),
    "scaled": ("base", "squared", "y", "neg", "abs", "input"),
    "square": ("base", "pow2", "mul", "square", "pow3", "abs_pow2", "times_y"),
    "mean": ("mean", "sum_n", "sum", "var"),
    "dim": ("last", "first", "first_nokeep", "last_list"),
    "eps": ("inside", "outside", "none"),
    "root": ("rsqrt", "one_over_sqrt", "pow_neg_half", "div_sqrt"),
    "weight": ("base", "left", "right", "one_plus", "none", "twice"),
    "weight_shape": ("row", "broadcast"),
    "cast_back": ("base", "to_dtype", "type_as", "half", "float32", "round_trip", "none"),
    "before": ("none", "residual", "scale"),
    "after": ("none", "mul_s", "add_b", "reuse"),
    # the neighbour templates that fit any layer/rms program (those the op table holds)
    "neighbour": ("none",) + tuple(n.name for n in neighbours.fuzzable()),
}


@dataclass(frozen=True)
class Skeleton:
    """The structure of a drawn norm program: a base style and one value per axis."""

    base: str = "qwen"
    upcast: str = "base"
    scaled: str = "base"
    square: str = "base"
    mean: str = "mean"
    dim: str = "last"
    eps: str = "inside"
    root: str = "rsqrt"
    weight: str = "base"
    weight_shape: str = "row"
    cast_back: str = "base"
    before: str = "none"
    after: str = "none"
    neighbour: str = "none"

    def key(self) -> str:
        """The skeleton as one token: "qwen" for the canonical form, "qwen:scaled=y,after=mul_s" with changes."""
        changes = self.changes()
        return self.base + (":" + ",".join(changes) if changes else "")

    @classmethod
    def from_key(cls, key: str) -> "Skeleton":
        base, _, rest = key.partition(":")
        values = dict(item.split("=", 1) for item in rest.split(",") if item)
        return cls(base=base, **values)

    def changes(self) -> tuple[str, ...]:
        """The non-canonical axis values, as `axis=value`."""
        return tuple(f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                     if f.name != "base" and getattr(self, f.name) != AXES[f.name][0])

    def describe(self) -> str:
        """"qwen" for the canonical Qwen norm, "qwen: scaled=y, after=mul_s" with changes."""
        changes = self.changes()
        return self.base + (": " + ", ".join(changes) if changes else "")

    @property
    def extra_inputs(self) -> tuple[str, ...]:
        """The extra inputs the rendered program reads."""
        return ("y",) if "y" in _reads(skeleton_source(self), names="y") else ()

    @property
    def pattern(self) -> str:
        return "layer_norm" if self.base == "layer" else "rms_norm"


# The base styles' own spellings (what "base" resolves to on each axis).
_BASE_UPCAST = {"qwen": "to", "llama": "float", "gemma": "float", "t5": "to", "layer": "to"}
_BASE_SQUARE = {"qwen": "pow2", "llama": "mul", "gemma": "pow2", "t5": "pow2", "layer": "pow2"}
_BASE_WEIGHT = {"qwen": "left", "llama": "right", "gemma": "one_plus", "t5": "left", "layer": "left"}
_BASE_SCALED = {"qwen": "squared", "llama": "squared", "gemma": "squared", "t5": "input", "layer": "squared"}
_BASE_BACK = {"qwen": "to_dtype", "llama": "type_as", "gemma": "type_as", "t5": "to_weight", "layer": "to_dtype"}


def _upcast(kind: str, name: str) -> str:
    return {"to": f"{name}.to(torch.float32)", "float": f"{name}.float()",
            "to_contiguous": f"{name}.to(torch.float32, memory_format=torch.contiguous_format)",
            "none": name, "half": f"{name}.to(torch.float16)"}[kind]


def _dims(kind: str) -> str:
    return {"last": "-1, keepdim=True", "first": "0, keepdim=True", "first_nokeep": "0",
            "last_list": "[-1], keepdim=True"}[kind]


def _count(kind: str) -> str:
    return "x.shape[0]" if kind.startswith("first") else "x.shape[-1]"


def skeleton_source(sk: Skeleton) -> str:
    """The program text of a skeleton (valid by construction for every base and axis value)."""
    lines: list[str] = []
    src = "x"
    if sk.before == "residual":
        lines.append("a = x + y")
        src = "a"
    elif sk.before == "scale":
        lines.append("a = x * 2")
        src = "a"
    up = _BASE_UPCAST[sk.base] if sk.upcast == "base" else sk.upcast
    lines.append(f"h = {_upcast(up, src)}")
    centered = "h"
    if sk.base == "layer":
        lines.append(f"m = h.mean({_dims(sk.dim)})")
        lines.append("c = h - m")
        centered = "c"
    square = _BASE_SQUARE[sk.base] if sk.square == "base" else sk.square
    sq = {"pow2": f"{centered}.pow(2)", "mul": f"({centered} * {centered})", "square": f"{centered}.square()",
          "pow3": f"{centered}.pow(3).abs()", "abs_pow2": f"{centered}.abs().pow(2)",
          "times_y": f"({centered} * {_upcast(up, 'y')})"}[square]
    if sk.mean == "mean":
        stat = f"{sq}.mean({_dims(sk.dim)})"
    elif sk.mean == "sum_n":
        stat = f"{sq}.sum({_dims(sk.dim)}) / {_count(sk.dim)}"
    elif sk.mean == "sum":
        stat = f"{sq}.sum({_dims(sk.dim)})"
    else:  # var: the spread around the mean, not the mean square (for an RMSNorm a near miss)
        stat = f"{centered}.var({_dims(sk.dim)}, correction=0)"
    lines.append(f"v = {stat}")
    shifted = {"inside": "v + eps", "outside": "v", "none": "v"}[sk.eps]
    scaled_kind = _BASE_SCALED[sk.base] if sk.scaled == "base" else sk.scaled
    scaled = {"squared": centered, "y": _upcast(up, "y"), "neg": f"(-{centered})", "abs": f"{centered}.abs()",
              "input": "x"}[scaled_kind]
    if sk.root == "rsqrt":
        norm = f"{scaled} * torch.rsqrt({shifted})"
    elif sk.root == "one_over_sqrt":
        norm = f"{scaled} * (1 / torch.sqrt({shifted}))"
    elif sk.root == "pow_neg_half":
        norm = f"{scaled} * ({shifted}).pow(-0.5)"
    else:
        norm = f"{scaled} / torch.sqrt({shifted})"
    if sk.eps == "outside":
        norm = norm.replace(f"torch.sqrt({shifted})", f"(torch.sqrt({shifted}) + eps)")
        norm = norm.replace(f"torch.rsqrt({shifted})", f"(1 / (torch.sqrt({shifted}) + eps))")
        norm = norm.replace(f"({shifted}).pow(-0.5)", f"(torch.sqrt({shifted}) + eps).pow(-1)")
    lines.append(f"n = {norm}")
    weight = _BASE_WEIGHT[sk.base] if sk.weight == "base" else sk.weight
    back = _BASE_BACK[sk.base] if sk.cast_back == "base" else sk.cast_back

    def cast_back(expr: str) -> str:
        return {"to_dtype": f"({expr}).to(x.dtype)", "type_as": f"({expr}).type_as(x)",
                "half": f"({expr}).to(torch.float16)", "float32": f"({expr}).to(torch.float32)",
                "round_trip": f"({expr}).to(torch.float16).to(x.dtype)", "none": expr,
                "to_weight": f"({expr}).to(w.dtype)"}[back]

    if weight == "one_plus":  # Gemma: scale in float32, then cast back
        out = cast_back("n * (1 + w.float())")
    elif weight == "none":
        out = cast_back("n")
    elif weight == "right":
        out = f"{cast_back('n')} * w"
    elif weight == "twice":
        out = f"w * {cast_back('n')} * w"
    else:
        out = f"w * {cast_back('n')}"
    if sk.base == "layer" and weight != "none":
        out = f"{out} + b"
    if sk.after == "mul_s":
        out = f"({out}) * s"
    elif sk.after == "add_b":
        out = f"({out}) + b"
    elif sk.after == "reuse":
        out = f"({out}) + n.to(x.dtype)"
    lines.append(f"return {out}")
    return "\n".join(lines)


def neighbour_source(sk: Skeleton, dtype: str, shape) -> str:
    """The skeleton's program with its neighbour template around it (cases/neighbours.py)."""
    if sk.neighbour == "none":
        return skeleton_source(sk)
    return neighbours.wrap(neighbours.BY_NAME[sk.neighbour], skeleton_source(sk), dtype, tuple(shape))


def explains(known: str, key: str) -> bool:
    """Whether the finding of skeleton `known` accounts for skeleton `key`: the same base, and every
    change of `known` among `key`'s (a program with one more change fails for the same reason)."""
    a, b = Skeleton.from_key(known), Skeleton.from_key(key)
    return a.base == b.base and set(a.changes()) <= set(b.changes())


def skeletons(bases=None) -> st.SearchStrategy[Skeleton]:
    """Skeletons over `bases` (default all); each axis keeps its canonical value 2 times in 3,
    so most examples are the canonical norm with one to a few changes."""
    bases = tuple(bases or BASES)
    for b in bases:
        if b not in BASES:
            raise ValueError(f"bases: unknown base {b!r}; known: {', '.join(BASES)}")

    @st.composite
    def draw_it(draw) -> Skeleton:
        values = {"base": draw(st.sampled_from(bases))}
        for axis, options in AXES.items():
            values[axis] = draw(_weighted([(options[0], 2 * (len(options) - 1))] + [(o, 1) for o in options[1:]]))
        return Skeleton(**values)

    return draw_it()


def spec_of(sk: Skeleton, *, dtype: str, shape: list[int], weight_dtype: str | None = None,
            input: dict | None = None, params: str = "ones", seed: int = 0, extra_input: dict | None = None,
            eps: float | None = None, grad: bool = False) -> CaseSpec:
    """The program case of a skeleton (its backward with `grad`)."""
    raw: dict = {"pattern": sk.pattern, "dtype": dtype, "shape": list(shape), "program": neighbour_source(sk, dtype, shape),
                 "params": {"kind": params}, "seed": seed, "input": input or {"kind": "normal"}}
    if weight_dtype and weight_dtype != dtype:
        raw["weight_dtype"] = weight_dtype
    if eps is not None:
        raw["eps"] = eps
    if grad:
        raw["grad"] = True
    if sk.extra_inputs:
        raw["inputs"] = {name: extra_input or {"kind": "normal"} for name in sk.extra_inputs}
    if sk.weight_shape == "broadcast":
        raw["param_shapes"] = {p: [1, shape[-1]] for p in ("w", "b", "s") if p in _reads(raw["program"])}
    if sk.neighbour != "none":  # the neighbour's own inputs and parameters (a broadcast weight keeps its shape)
        inputs, shapes = neighbours.extras(neighbours.BY_NAME[sk.neighbour], tuple(shape))
        raw["inputs"] = {**inputs, **raw.get("inputs", {})}
        raw["param_shapes"] = {**shapes, **raw.get("param_shapes", {})}
        for key in ("inputs", "param_shapes"):
            if not raw[key]:
                del raw[key]
    return CaseSpec.from_dict(raw)


def _reads(program: str, names: str = "wbs") -> set[str]:
    """Which of the one-letter `names` a rendered program reads (its text is ours: a token scan suffices)."""
    return set(re.findall(rf"\b([{names}])\b", program))


def program_specs(*, bases=None, dtypes=None, input_kinds=None, max_row: int = 4096,
                  max_elements: int = 65536, grad: bool | None = None) -> st.SearchStrategy[CaseSpec]:
    """Program cases: a skeleton, a dtype, a shape of 2 dims (first: rows), inputs and parameters."""
    return program_batches(bases=bases, dtypes=dtypes, input_kinds=input_kinds, max_row=max_row,
                           max_elements=max_elements, inputs_per_structure=1,
                           grad=grad).map(lambda batch: batch.specs[0])


def program_batches(*, bases=None, dtypes=None, input_kinds=None, max_row: int = 4096, max_elements: int = 65536,
                    inputs_per_structure: int = INPUTS_PER_STRUCTURE,
                    grad: bool | None = None) -> st.SearchStrategy[Batch]:
    """Program cases of one structure: a skeleton, a dtype, a weight dtype, a shape of 2 dims (first: rows),
    parameters and a seed, then 1 to `inputs_per_structure` inputs (each with the extra input it may read); the
    batch is a gradient case one time in GRAD_SHARE, read off its seed (`grad` None; True or False fixes it:
    strategies.is_grad), so that the forward batches' choices are what they were.

    The seed is the structure's: with "normal" parameters it draws them, and compiled paths embed them.
    """
    dtypes = tuple(dtypes or DTYPES)
    for d in dtypes:
        if d not in DTYPES:
            raise ValueError(f"dtypes: unknown value {d!r}; known: {', '.join(DTYPES)}")
    inputs = input_specs(input_kinds)
    dtype_options = [(d, 1 if d == "float32" else 2) for d in DTYPES if d in dtypes]
    sks = skeletons(bases)

    @st.composite
    def draw_it(draw) -> Batch:
        sk = draw(sks)
        dtype = draw(_weighted(dtype_options))
        weight_dtype = draw(_weighted([("same", 3), ("float32", 1)]))
        n = draw(_pow2ish(min(max_row, max_elements // 2)))
        if sk.neighbour != "none":  # a pool's kernel needs a row at least that long
            n = max(n, neighbours.BY_NAME[sk.neighbour].min_row)
        rows = draw(st.integers(2, max(2, min(8, max_elements // n))))
        params = draw(st.sampled_from(("ones", "normal")))
        seed = draw(st.integers(0, 2 ** 31 - 1))
        pairs = draw(st.lists(st.tuples(inputs, inputs), min_size=1, max_size=inputs_per_structure))
        backward = is_grad(seed, grad)
        specs = {}
        for inp, extra in pairs:  # the same input twice is one case
            spec = spec_of(sk, dtype=dtype, shape=[rows, n],
                           weight_dtype="float32" if weight_dtype == "float32" else None,
                           input=inp, params=params, seed=seed, extra_input=extra, grad=backward)
            specs.setdefault(spec.case_id, spec)
        return Batch(tuple(specs.values()), sk.key())

    return draw_it()
