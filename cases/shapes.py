"""The shapes suite (issue 47, docs/shapes.md): every norm compiled once with symbolic dims, run at boundary sizes.

Each catalog pattern in each dtype gets one structure whose dims deployments
leave symbolic: the sequence of an LLM's layer/RMS norm ([2, S, H]: its rows),
the height and width of an image model's group and batch
norm ([1, C, H, W]), the length an instance norm reduces over ([1, C, L]).
A catalog case cannot make the dim its module is built for symbolic, so the
reduction lengths of layer/RMS norm come from their program twins
(the very text the style's module runs, as harness.oracle.twins writes it) with the last
dim symbolic. The context suite's norms in their neighbourhoods
(cases/neighbours.py) join with their sequence dim symbolic, where the
program holds another sequence length (no literal size of it in the text),
and so do module cases: torch's nn.RMSNorm and, with the zoo extra, the
transformers norms most models share, as the zoo builds them.

Every size of one structure shares its compiled artifact (structure_key drops
the symbolic sizes), so a structure costs one compile per path however many
sizes it runs. The sizes are the boundaries where a compile's choices change:
1; small primes; non-multiples of the vector widths (8, 16, 32 lanes) and
tiles; 2,048 and 2,049; 4,096 ± 1; and, for the reduction lengths and a few
float16 structures only (memory and time), 65,504 (float16's largest
finite), 65,520 (where a float16 count rounds to inf), 65,536 and 70,000.
"""
from __future__ import annotations

from cases import neighbours
from harness.program import style_program
from harness.spec import CaseSpec, SpecError

DTYPES = ("float16", "bfloat16", "float32")
# A benign input with a mean far from 0, so a wrong element count (a size hint, an inf count) shows in the mean.
INPUT = {"kind": "uniform", "low": -1.0, "high": 3.0}
SMALL = (1, 3, 7, 13, 67, 127, 257, 1023)  # 1; small primes; odd sizes off every vector width and tile
MID = (2048, 2049, 4095, 4096, 4097)  # a power-of-two tile and its neighbours
LARGE = (65504, 65520, 65536, 70000)  # float16's largest finite, its count's rounding to inf, 2**16, the issue's
LENGTHS = SMALL + MID + LARGE  # a reduction length: every boundary
SEQUENCES = SMALL + MID  # an LLM norm's sequence (its rows grow, its reduction does not)
# (H, W) of an image norm: 1x1, primes, off-tile, 2,048 / 2,049 / 4,095 / 4,096 / 4,097 pixels, 65,536 and 70,000
# pixels for float16 only (a group's count past float16's range). No LLM norm runs 65k+ rows: its reduction stays
# 64 long, and scoring 4M elements row by row costs ~10 s an execution (measured on eager).
SPATIAL = ((1, 1), (3, 7), (13, 67), (33, 127), (32, 64), (3, 683), (63, 65), (64, 64), (17, 241))
SPATIAL_LARGE = ((256, 256), (250, 280))
# The bounds the symbolic dims compile for where the default (131,072) would not fit: a runtime that plans its
# memory for the upper bound (ExecuTorch, XNNPACK) asks 131,072 x 131,072 pixels of an image norm (bad_alloc,
# measured), so an image side is bounded as a deployment bounds it, and so is an LLM's context.
SEQUENCE_MAX = 8192
SIDE_MAX = 1024
HIDDEN = 64
CHANNELS = 8


def _sized(raw: dict, shape: list[int]) -> dict:
    return {**raw, "shape": list(shape)}


def _ones_last(rows: list[dict]) -> list[dict]:
    """A structure's cases with those of a symbolic size 1 last: the engine compiles a structure with its first
    case's input as the example, and torch.export specialises a dim it traces at 1 (or refuses it as a Dim)."""
    return sorted(rows, key=lambda raw: any(raw["shape"][d] == 1 for d in raw["dynamic"]))


def _llm(pattern: str, style: str, cast: str | None, dtype: str) -> list[dict]:
    """[2, S, H] with the sequence S symbolic (bounded by SEQUENCE_MAX): every sequence size."""
    raw = {"pattern": pattern, "style": style, "dtype": dtype, "shape": [2, 3, HIDDEN], "dynamic": [1],
           "dynamic_max": SEQUENCE_MAX, "params": {"kind": "normal"}, "input": INPUT}
    if cast:
        raw["cast"] = cast
    return _ones_last([_sized(raw, [2, s, HIDDEN]) for s in SEQUENCES])


def _image(pattern: str, dtype: str) -> list[dict]:
    """[1, C, H, W] with H and W symbolic (group norm: 4 groups of 2 channels)."""
    raw = {"pattern": pattern, "dtype": dtype, "shape": [1, CHANNELS, 1, 1], "dynamic": [2, 3],
           "dynamic_max": SIDE_MAX, "params": {"kind": "normal"}, "input": INPUT}
    if pattern == "group_norm":
        raw["groups"] = 4
    sizes = SPATIAL + (SPATIAL_LARGE if dtype == "float16" else ())
    return _ones_last([_sized(raw, [1, CHANNELS, h, w]) for h, w in sizes])


def _instance(dtype: str) -> list[dict]:
    """[1, C, L] with the length L an instance norm reduces over symbolic: every boundary (the issue's probe)
    but 1 (torch refuses an instance norm of one element)."""
    raw = {"pattern": "instance_norm", "dtype": dtype, "shape": [1, 4, 2], "dynamic": [2], "input": INPUT}
    return [_sized(raw, [1, 4, n]) for n in LENGTHS if n > 1]


def _reduction(pattern: str, style: str, cast: str | None, dtype: str) -> list[dict]:
    """The style's program twin (the text its module runs, as harness.oracle.twins writes it) over [2, L] with its
    normalised length L symbolic: every boundary. Without a weight (one would be as long as L: a symbolic
    parameter no deployment has)."""
    twin = {"pattern": pattern, "dtype": dtype, "shape": [2, 8], "input": INPUT, "dynamic": [1],
            "program": style_program(pattern, style, cast, "none", dtype)}
    return _ones_last([_sized(twin, [2, n]) for n in LENGTHS])


# The catalog norms LLMs deploy with a symbolic sequence (nn.LayerNorm; transformers' Qwen2RMSNorm).
LLM_NORMS = (("layer_norm", "module", None), ("rms_norm", "qwen", "to"))
CONTEXT_SEQUENCES = (1, 13, 257)  # tokens of a context case: one compile, three sizes (QK scores at 2,049 tokens
# materialise a [2, 2049, 2049, 64] product in the reference: 2 GiB, over a worker's memory, measured)
# The neighbourhoods an LLM runtime compiles with a symbolic sequence, around the norm the context suite puts
# there first (the Qwen RMSNorm): the residual stream's add, the Q/K scores, rotary embeddings, the projection
# after. A few: each is a compile per path (the suite's time, docs/measurements.md).
CONTEXT_NEIGHBOURS = ("residual-after", "qk-scores", "rotary-after", "linear-after")


def _context() -> list[dict]:
    """The CONTEXT_NEIGHBOURS around their first context-suite norm, float16, tokens (dim 1) symbolic, where the
    program holds another token count."""
    out = []
    firsts = {}
    for nb, norm in neighbours.suite_pairs(neighbours.active()):
        firsts.setdefault(nb.name, (nb, norm))
    for name in CONTEXT_NEIGHBOURS:
        if name not in firsts:
            continue
        nb, norm = firsts[name]
        raw = {**neighbours.spec_of(nb, norm, "float16", input=INPUT), "dynamic": [1], "dynamic_max": SEQUENCE_MAX}
        if len(raw["shape"]) == 3 and _holds(raw):
            out += _ones_last([_sized(raw, [raw["shape"][0], s, raw["shape"][2]]) for s in CONTEXT_SEQUENCES])
    return out


def _holds(raw: dict) -> bool:
    """The program reads no literal token count: it checks at other counts (a prime and one), as at its own."""
    try:
        for s in (1, 13):
            CaseSpec.from_dict(_sized(raw, [raw["shape"][0], s, raw["shape"][2]]))
    except SpecError:
        return False
    return True


# Module cases (docs/contracts.md §8) with their sequence symbolic, as an LLM runtime compiles them: torch's own
# nn.RMSNorm, and with the zoo extra the transformers implementations at least ZOO_MEMBERS classes share over
# [B, S, H] (Llama's RMSNorm, 138 classes; Gemma2's zero-centred one, 13), each as the zoo builds it. float16 only,
# and fewer sizes than SEQUENCES: each structure is a compile per path and a lift, each size a lift check.
MODULE_NORMS = ({"pattern": "rms_norm", "class": "torch.nn:RMSNorm", "init": {"normalized_shape": HIDDEN},
                 "params": {"kind": "normal"}},)
MODULE_SEQUENCES = (1, 7, 67, 257, 2049, 4097)  # 1; off every vector width; past the 2,048 and 4,096 tiles
ZOO_MEMBERS = 13


def _module(base: dict) -> list[dict]:
    """A module spec over [B, S, H] in float16, its sequence S (dim 1) symbolic: every MODULE_SEQUENCES size."""
    batch, _, hidden = base.get("shape", [2, 8, HIDDEN])
    raw = {**base, "dtype": "float16", "input": INPUT, "dynamic": [1], "dynamic_max": SEQUENCE_MAX}
    return _ones_last([_sized(raw, [batch, s, hidden]) for s in MODULE_SEQUENCES])


def _zoo_bases() -> list[dict]:
    """The zoo's most shared implementations over [B, S, H] (none without transformers)."""
    from harness.zoo.catalog import installed, load_zoo

    if not installed():
        return []
    return [e.base for e in load_zoo().entries if e.base is not None and len(e.members) >= ZOO_MEMBERS
            and len(e.base["shape"]) == 3 and e.base.get("pattern") in ("layer_norm", "rms_norm")]


def modules() -> list[dict]:
    """The module and zoo cases of the suite, their sequence symbolic."""
    return [raw for base in (*MODULE_NORMS, *_zoo_bases()) for raw in _module(base)]


def specs() -> list[dict]:
    """The shapes suite's raw specs, structure by structure."""
    out: list[dict] = []
    for dtype in DTYPES:
        for pattern, style, cast in LLM_NORMS:
            out += _llm(pattern, style, cast, dtype) + _reduction(pattern, style, cast, dtype)
        out += _image("group_norm", dtype) + _image("batch_norm", dtype) + _instance(dtype)
    return out + _context() + modules()
