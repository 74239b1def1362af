"""Named suites of case specs: smoke (fast, every pattern), nightly, full, nearmiss, zoo.

A suite is a deterministic list of specs; `normdiff cases --suite NAME`
prints it as JSON lines.

* `smoke`: hand-picked cases, every pattern and style, every dtype,
  cast style and input kind, the two seeds, a row over 65,504 elements;
  small enough for `make run` on every path.
* `nightly`: every (pattern, style, cast) × dtype structure crossed with every
  input variant (benign and adversarial), the remaining structure factors
  (mixed weight dtype, rank, layout, affine, parameters) covered pairwise,
  plus the seeds and long rows.
* `full`: the whole product of the nightly factors, plus the same extras.
* `nearmiss`: the near-miss catalog and its legitimate variants (cases/nearmiss.py), as programs.
* `context`: each catalog norm in the neighbourhoods real models put around it (cases/neighbours.py):
  every active neighbour template around a few norms, in three dtypes, on a normal and an outlier input;
  `suite_notes("context")` names the templates waiting for an op of the language.
* `gradients`: the backward (`"grad": true`) of every catalog pattern, dtype and cast style on many and long
  rows, offsets and outliers, of the context suite's neighbourhoods and of the zoo's most shared norms
  (cases/gradients.py).
* `shapes`: every catalog pattern and dtype compiled once with symbolic dims (rows, sequence, spatial dims,
  reduction lengths through the program twins) and run at boundary sizes from 1 to 70,000; the context
  suite's norms with their sequence symbolic (cases/shapes.py, docs/shapes.md).
* `zoo`: every norm implementation of the installed transformers as module cases (the `zoo` extra;
  without it, one line saying how to install it): three dtypes, a normal and an outlier input.

Cases that differ only in their input share a compiled artifact, so each
structure carries every input variant and the seed stays 0 (a "normal"
parameter draw puts the seed into the structure key).
"""
from __future__ import annotations

from cases import gradients, nearmiss, neighbours, shapes
from cases.pairwise import pairwise, product
from harness.spec import CaseSpec, SpecError, input_of
from harness.spec.keys import style_variants

# The two seeds and their controls come first: every suite must show them.
SEED_TVM = {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
            "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0}, "eps": 1e-5}
SEED_EXECUTORCH = {"pattern": "rms_norm", "style": "qwen", "cast": "to", "dtype": "float16",
                   "shape": [2, 8, 64], "params": {"kind": "normal"}}
SEEDS = [SEED_TVM, {**SEED_TVM, "dtype": "float32"}, SEED_EXECUTORCH,
         {**SEED_EXECUTORCH, "dtype": "bfloat16"}, {**SEED_EXECUTORCH, "dtype": "float32"}]

# A large offset per dtype that keeps ±1 around it representable: float16
# spaces 0.5 at 1000, bfloat16 0.5 at 100; float32 gets apache/tvm#19592's 80000.
LARGE_OFFSET = {"float16": 1000.0, "bfloat16": 100.0, "float32": 80000.0}


def inputs_for(dtype: str) -> list[dict]:
    """The input variants every nightly structure runs: two benign, the rest adversarial."""
    big = LARGE_OFFSET[dtype]
    return [
        {"kind": "normal"},
        {"kind": "uniform", "low": -1.0, "high": 3.0},
        {"kind": "alternating", "amplitude": 0.25, "offset": 0.0},
        {"kind": "alternating", "amplitude": 1.0, "offset": big},
        {"kind": "offset", "offset": big, "std": 1.0},
        {"kind": "constant", "value": 0.1},
        input_of("outlier"),
        {"kind": "overflow", "magnitude": 300.0},
        {"kind": "tiny", "scale": 1e-6},
        {"kind": "subnormal", "fraction": 1.0},
    ]


# -- smoke ------------------------------------------------------------------

def _nearmiss() -> list[dict]:
    """Every near miss and legitimate variant (cases/nearmiss.py) in float16 and float32, the canonical
    Qwen program in bfloat16 too; each on its own input and on an outlier input (LLM activations)."""
    out = []
    for n in nearmiss.CATALOG:
        dtypes = ["float16", "float32"] + (["bfloat16"] if n.name == "qwen" else [])
        for dtype in dtypes:
            base = nearmiss.spec_of(n, dtype)
            out.append(base)
            if "input" not in n.extra:
                out.append({**base, "input": input_of("outlier")})
    return out


def _smoke() -> list[dict]:
    ln = {"pattern": "layer_norm", "shape": [4, 256], "params": {"kind": "normal"}}
    rms = {"pattern": "rms_norm", "shape": [4, 256], "params": {"kind": "normal"}}
    gn = {"pattern": "group_norm", "shape": [2, 8, 4, 4], "groups": 4, "layout": "channels_last",
          "params": {"kind": "normal"}}
    return SEEDS + [
        # programs: a near miss a rewrite must leave alone, and the canonical Qwen norm it comes from
        nearmiss.spec_of(nearmiss.get("scaled-not-squared"), "float32"),
        nearmiss.spec_of(nearmiss.get("qwen"), "float32"),
        {**SEED_TVM, "input": {"kind": "offset", "offset": 1000, "std": 1}},
        {**SEED_TVM, "dtype": "float32", "input": {"kind": "alternating", "amplitude": 1, "offset": 80000}},
        {**SEED_EXECUTORCH, "input": {"kind": "overflow", "magnitude": 300}},
        {**SEED_EXECUTORCH, "input": {"kind": "subnormal", "fraction": 1}},
        {**ln, "style": "upcast", "cast": "float", "dtype": "bfloat16"},
        {**ln, "style": "upcast", "cast": "float", "dtype": "bfloat16",
         "input": input_of("outlier")},
        {**ln, "style": "upcast", "cast": "float", "dtype": "bfloat16",
         "input": {"kind": "offset", "offset": 100, "std": 1}},
        {**ln, "style": "manual", "dtype": "float16"},
        {**ln, "style": "manual", "dtype": "float16", "input": {"kind": "uniform", "low": -1, "high": 3}},
        # a row over 65,504 elements: an element count kept in float16 is inf
        {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 65536]},
        {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 65536],
         "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0}},
        {**rms, "style": "module", "dtype": "bfloat16"},
        {**rms, "style": "module", "dtype": "bfloat16", "input": {"kind": "alternating", "amplitude": 1, "offset": 100}},
        {**rms, "style": "llama", "cast": "type_as", "dtype": "float16"},
        {**rms, "style": "llama", "cast": "type_as", "dtype": "float16", "input": {"kind": "tiny", "scale": 1e-6}},
        {**rms, "style": "t5", "cast": "to", "dtype": "float16"},
        {**rms, "style": "gemma", "cast": "type_as", "dtype": "bfloat16"},
        {**rms, "style": "gemma", "cast": "type_as", "dtype": "bfloat16",
         "input": input_of("outlier")},
        {"pattern": "rms_norm", "style": "qwen", "cast": "to_contiguous", "dtype": "float16",
         "weight_dtype": "float32", "shape": [2, 4, 4, 32], "layout": "channels_last",
         "params": {"kind": "normal"}},
        {**gn, "dtype": "float16"},
        {**gn, "dtype": "float16", "input": {"kind": "constant", "value": 0.1}},
        {"pattern": "instance_norm", "dtype": "float16", "shape": [2, 4, 4, 4],
         "input": {"kind": "constant", "value": 0.1}},
        {"pattern": "instance_norm", "dtype": "float16", "shape": [2, 4, 4, 4],
         "input": {"kind": "offset", "offset": 1000, "std": 1}},
        {"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3], "params": {"kind": "normal"}},
        {"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3], "params": {"kind": "normal"},
         "input": {"kind": "overflow", "magnitude": 300}},
    ]


# -- nightly and full: the structure factors ---------------------------------

# Small shapes per pattern and rank (compiles dominate a run; long rows are extras).
SHAPES: dict[str, dict[int, list[int]]] = {
    "layer_norm": {2: [4, 256], 3: [2, 4, 128], 4: [2, 2, 4, 64]},
    "rms_norm": {2: [4, 256], 3: [2, 4, 128], 4: [2, 2, 4, 64]},
    "group_norm": {2: [4, 16], 3: [2, 16, 32], 4: [2, 16, 4, 8]},
    "instance_norm": {3: [2, 8, 64], 4: [2, 8, 8, 8]},
    "batch_norm": {2: [16, 32], 3: [4, 16, 16], 4: [2, 16, 4, 4]},
}
GROUPS = 4




def factors() -> dict[str, list]:
    """The structure factors: what a compiled artifact depends on."""
    return {
        "variant": style_variants(),
        "dtype": ["float32", "float16", "bfloat16"],
        "weight": ["same", "float32"],
        "rank": [2, 3, 4],
        "layout": ["contiguous", "channels_last"],
        "affine": ["none", "weight", "weight_bias"],
        "params": ["ones", "normal"],
    }


def structure(row: dict) -> dict | None:
    """The spec (without input) of a factor row, or None if the row is not a valid case."""
    pattern, style, cast = row["variant"]
    shape = SHAPES[pattern].get(row["rank"])
    if shape is None or (row["weight"] == "float32" and row["dtype"] == "float32"):
        return None
    raw = {"pattern": pattern, "style": style, "dtype": row["dtype"], "shape": shape,
           "layout": row["layout"], "affine": row["affine"], "params": {"kind": row["params"]}}
    if cast:
        raw["cast"] = cast
    if row["weight"] == "float32":
        raw["weight_dtype"] = "float32"
    if pattern == "group_norm":
        raw["groups"] = GROUPS
    try:
        CaseSpec.from_dict(raw)
    except SpecError:
        return None
    return raw


def _valid(row: dict) -> bool:
    return structure(row) is not None


def _with_inputs(structures: list[dict]) -> list[dict]:
    return [{**s, "input": inp} for s in structures for inp in inputs_for(s["dtype"])]


def _extras() -> list[dict]:
    """The seeds with every input variant, and long rows (4096+; over 65,504 elements)."""
    long_rows = [
        {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 65536]},
        {"pattern": "layer_norm", "dtype": "bfloat16", "shape": [2, 8192]},
        {"pattern": "layer_norm", "style": "upcast", "cast": "to", "dtype": "float16", "shape": [1, 65536]},
        {"pattern": "layer_norm", "style": "manual", "dtype": "float16", "shape": [2, 4096]},
        {"pattern": "rms_norm", "style": "qwen", "cast": "to", "dtype": "float16", "shape": [1, 65536]},
        {"pattern": "rms_norm", "dtype": "float16", "shape": [2, 4096]},
        {"pattern": "rms_norm", "style": "llama", "cast": "type_as", "dtype": "bfloat16", "shape": [2, 8192]},
        # a Stable Diffusion VAE group: 16 channels of 64×64 = 65,536 elements
        {"pattern": "group_norm", "dtype": "float16", "shape": [1, 32, 64, 64], "groups": 2},
        {"pattern": "instance_norm", "dtype": "float16", "shape": [1, 2, 256, 256]},
    ]
    seeds = [{k: v for k, v in s.items() if k != "input"} for s in SEEDS]
    return SEEDS + _with_inputs(seeds + long_rows)


def _nightly() -> list[dict]:
    # smoke is part of nightly, so the baseline made from a nightly run covers smoke runs too
    rows = pairwise(factors(), _valid)
    return _extras() + _with_inputs([structure(r) for r in rows]) + _smoke() + _nearmiss()


def _full() -> list[dict]:
    rows = product(factors(), _valid)
    return _extras() + _with_inputs([structure(r) for r in rows]) + _smoke() + _nearmiss()


def _zoo() -> list[dict]:
    """Every norm implementation of the installed transformers (docs/contracts.md §9), as module cases: each in float32,
    float16 and bfloat16, on a normal input and the catalog's outlier input (harness/zoo)."""
    from harness.zoo.catalog import installed, zoo_specs

    if not installed():
        raise KeyError("the zoo needs transformers: pip install 'normdiff[zoo]'")
    outlier = lambda dtype: next(i for i in inputs_for(dtype) if i["kind"] == "outlier")  # noqa: E731
    return zoo_specs(inputs_for=lambda dtype: [{"kind": "normal"}, outlier(dtype)])


def _context() -> list[dict]:
    """Every active neighbour (cases/neighbours.py) around its suite norms, in float16, bfloat16 and float32,
    on a normal and an outlier input (the LLM activations a residual stream carries)."""
    out = []
    for nb, norm in neighbours.suite_pairs(neighbours.active()):
        for dtype in neighbours.SUITE_DTYPES:
            for inp in ({"kind": "normal"}, input_of("outlier")):
                out.append(neighbours.spec_of(nb, norm, dtype, input=inp))
    return out


SUITES = {"smoke": _smoke, "nightly": _nightly, "full": _full, "nearmiss": _nearmiss, "context": _context,
          "shapes": shapes.specs, "zoo": _zoo, "gradients": gradients.suite}


def suite_notes(name: str) -> list[str]:
    """What a suite leaves out and why, one line each (`normdiff cases` prints them on stderr)."""
    if name == "gradients":
        return gradients.notes()
    if name != "context":
        return []
    return ([f"pending: {nb.name} ({why})" for nb, why in neighbours.pending()]
            + [f"not wrapped: {pattern} ({why})" for pattern, why in neighbours.NOT_WRAPPED.items()])


def suite_names() -> list[str]:
    return sorted(SUITES)


def suite(name: str) -> list[CaseSpec]:
    """The specs of suite `name` (KeyError naming the known suites if unknown)."""
    if name not in SUITES:
        raise KeyError(f"unknown suite {name!r}; known: {', '.join(suite_names())}")
    seen: dict[str, CaseSpec] = {}
    for raw in SUITES[name]():
        spec = CaseSpec.from_dict(raw)
        seen.setdefault(spec.case_id, spec)
    return list(seen.values())
