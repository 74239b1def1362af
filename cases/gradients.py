"""The `gradients` suite (issue 46, docs/gradients.md): the backward of every catalog norm, of the context suite's
neighbourhoods whose backward the language holds, and of a sample of the zoo, as `"grad": true` cases.

* Catalog: every (pattern, style, cast) once, its dtype in turn (float16, bfloat16, float32), and the `module`
  style of a pattern in the dtypes its variants did not reach, so every pattern meets every dtype; each structure on many rows (thousands: the weight and bias
  gradients sum over all of them) or on long rows (4,096 to 16,384 elements: the input gradient's row sums),
  in turn, with drawn parameters, on a normal, an offset (the suites' large offset of the dtype) and an outlier
  input.
* Context: every neighbourhood of the context suite (cases/neighbours.py) whose backward lifts, around its
  first suite norm, its dtype in turn, on a normal input; `NO_BACKWARD` names the others and the op their backward needs
  (`normdiff cases --suite gradients` prints them on stderr).
* Zoo: with the zoo extra, the transformers norm implementations that at least ZOO_MEMBERS library classes
  share (the ones most models run), in bfloat16 on a normal input.

Cases that differ only in their input share a structure (one compile a path), so the inputs are crossed with
structures and the structures are as few as the coverage allows: a structure's compiles on every path that
trains cost about a minute of a loaded 2-core machine (docs/measurements.md).
"""
from __future__ import annotations

from cases import neighbours
from harness.spec import PATTERNS, input_of
from harness.spec.keys import style_variants

DTYPES = ("float16", "bfloat16", "float32")
LARGE_OFFSET = {"float16": 1000.0, "bfloat16": 100.0, "float32": 80000.0}  # cases/suites.py's, per dtype
# Many rows and long rows per pattern: (many, long)
SHAPES = {
    "layer_norm": ([4096, 64], [2, 8192]),
    "rms_norm": ([4096, 64], [1, 16384]),
    "group_norm": ([64, 32, 8, 8], [2, 32, 32, 32]),   # 4 groups: 4,096 elements a channel; rows of 8,192
    "instance_norm": ([64, 16, 64], [2, 8, 64, 64]),   # 64 samples a channel; rows of 4,096
    "batch_norm": ([4096, 32], [2, 16, 64, 64]),       # eval: the running statistics; 4,096 and 8,192 a channel
}
GROUPS = 4
ZOO_MEMBERS = 5
# Neighbourhoods whose backward meets an op the program language does not hold (the lifted backward is
# `unsupported`): the op, named by the lifter.
NO_BACKWARD = {
    "relu-before": "aten.le (relu's backward mask)", "relu-after": "aten.le (relu's backward mask)",
    "hardswish-after": "aten.le (hardswish's backward)", "pool-hardswish": "aten.le (hardswish's backward)",
    "bn-elu-groupnorm": "aten.le (elu's backward)", "gelu-after": "aten.erf (gelu's backward)",
    "gelu-tanh-after": "aten.tanh (gelu's tanh form's backward)", "rotary-after": "aten.full (the rotate's backward)",
}


def inputs(dtype: str) -> list[dict]:
    return [{"kind": "normal"}, {"kind": "offset", "offset": LARGE_OFFSET[dtype], "std": 1.0}, input_of("outlier")]




def _structures() -> list[tuple[str, str, str | None, str]]:
    """(pattern, style, cast, dtype): every variant in one dtype, in turn, then the `module` style of each pattern
    in the dtypes its variants did not reach (group, instance and batch norm have that style alone)."""
    out = [(pattern, style, cast, DTYPES[k % len(DTYPES)]) for k, (pattern, style, cast) in enumerate(style_variants())]
    for pattern in PATTERNS:
        reached = {d for p, _, _, d in out if p == pattern}
        out += [(pattern, "module", None, d) for d in DTYPES if d not in reached]
    return out


def catalog() -> list[dict]:
    out = []
    for k, (pattern, style, cast, dtype) in enumerate(_structures()):
        raw = {"pattern": pattern, "style": style, "dtype": dtype, "shape": SHAPES[pattern][k % 2],
               "params": {"kind": "normal"}, "grad": True}
        if cast:
            raw["cast"] = cast
        if pattern == "group_norm":
            raw["groups"] = GROUPS
        out += [{**raw, "input": inp} for inp in inputs(dtype)]
    return out


def context() -> list[dict]:
    """Each neighbourhood whose backward lifts, around the first of its suite norms (its report's), a dtype in
    turn."""
    first = {}
    for nb, norm in neighbours.suite_pairs(neighbours.active()):
        if nb.name not in NO_BACKWARD:
            first.setdefault(nb.name, (nb, norm))
    pairs = list(first.values())
    return [{**neighbours.spec_of(nb, norm, DTYPES[k % len(DTYPES)], input={"kind": "normal"}), "grad": True}
            for k, (nb, norm) in enumerate(pairs)]


def zoo() -> list[dict]:
    """The zoo's most shared implementations (none without transformers)."""
    from harness.zoo.catalog import installed, load_zoo
    from harness.zoo.synth import specs_of

    if not installed():
        return []
    picked = [e for e in load_zoo().entries if e.base is not None and len(e.members) >= ZOO_MEMBERS]
    return [{**raw, "grad": True} for e in picked
            for raw in specs_of(e.base, ("bfloat16",), lambda dtype: [{"kind": "normal"}])]


def suite() -> list[dict]:
    return catalog() + context() + zoo()


def notes() -> list[str]:
    """What the suite leaves out and why, one line each."""
    return [f"no backward: {name} ({why})" for name, why in NO_BACKWARD.items()]
