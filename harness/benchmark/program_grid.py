"""The program benchmark's cases: the catalog's styles as programs, and the near-miss catalog, over the suites' factors.

* Every layer_norm and rms_norm style's program (harness.oracle.twins: the
  same bytes as the style case), for every dtype, with the nightly suite's
  input variants of that dtype (grid.inputs), drawn weights, rows of 256 and
  4096 elements, and a float32 weight under float16/bfloat16 inputs on the
  short rows (the mixed models); llama, whose program gives qwen's bits, on
  the short rows only.
* Every near-miss and legitimate-variant program of cases/nearmiss.py, in
  every dtype (an entry that pins its dtype keeps it), on its own input and,
  where it has none, on the outlier and large-offset inputs of the suites,
  on its own rows of 64; and on rows of 1023 (long, and an element count
  bfloat16 cannot hold) on its own input.
* Written-out float32 statistics (a layer norm's mean and variance as
  reductions) on float16 and bfloat16 rows offset by 1000, 1000 and 4096
  elements long: where a correct float32 Welford order (Inductor's, for
  this very pattern) and the written two-pass order part the most.
* Neighbourhoods (NEIGHBOURHOODS): a norm with the ops models put around it
  (a projection, a softmax, the activations, a running sum, a rotary rotate,
  a pool and an upsample), every dtype, normal rows of 256 (and 1024 but for
  `quick`), and the outlier and large-offset inputs on the short rows.
* Module cases (docs/contracts.md §8): a sample of the zoo (§9), the transformers
  norm implementations that most library classes share, as the zoo suite
  specs them; the renderings take a module case through its lifted program
  (harness.benchmark.program_implementations.program_of), as its reference.

As for the catalog's grid, nothing here is chosen from the oracle's verdicts.
"""
from __future__ import annotations

from cases import nearmiss
from cases.suites import LARGE_OFFSET
from harness.benchmark.grid import inputs
from harness.core.dtypes import DTYPES
from harness.oracle.twins import program_twin
from harness.spec import CaseSpec, input_of

STYLES = {"layer_norm": ("module", "upcast", "manual"), "rms_norm": ("module", "qwen", "llama", "t5", "gemma")}
SHORT, LONG = [4, 256], [2, 4096]
# llama's program gives qwen's very bits in every dtype and weight dtype (h * h is pow(2), type_as is .to,
# out * w is w * out): its long and mixed rows would repeat qwen's, so it runs on the short rows only
SHORT_ONLY = ("llama",)
NEARMISS_ROWS = (64, 1023)  # its own rows, and an odd long row (an element count inexact in bfloat16)
OUTLIER = input_of("outlier")
ZOO_MEMBERS = 5  # the zoo's sample: implementations that at least this many library classes share


def style_cases(quick: bool = False) -> list[CaseSpec]:
    """Each catalog style's program twin over dtypes, the suites' inputs, short and long rows."""
    specs = []
    for pattern, styles in STYLES.items():
        for style in styles:
            for shape in ([SHORT] if quick or style in SHORT_ONLY else [SHORT, LONG]):
                for dtype in DTYPES:
                    for weight_dtype in dict.fromkeys((dtype, "float32")):
                        if weight_dtype != dtype and (shape != SHORT or style in SHORT_ONLY):
                            continue  # mixed models: the short rows
                        for inp in inputs(dtype):
                            spec = CaseSpec.from_dict({
                                "pattern": pattern, "style": style, "dtype": dtype, "weight_dtype": weight_dtype,
                                "shape": shape, "params": {"kind": "normal"}, "input": inp})
                            specs.append(program_twin(spec))
    return specs


def nearmiss_cases(quick: bool = False) -> list[CaseSpec]:
    """Every near-miss catalog program in every dtype, on its own input or the outlier and offset inputs."""
    specs, seen = [], set()
    for entry in nearmiss.CATALOG:
        for dtype in DTYPES:
            for row in NEARMISS_ROWS[:1] if quick else NEARMISS_ROWS:
                base = nearmiss.spec_of(entry, dtype, shape=[nearmiss.SHAPE[0], row])
                variants = [base] if "input" in entry.extra or row != NEARMISS_ROWS[0] else [
                    base, {**base, "input": OUTLIER},
                    {**base, "input": {"kind": "offset", "offset": LARGE_OFFSET[base["dtype"]], "std": 1.0}}]
                for raw in variants:
                    spec = CaseSpec.from_dict(raw)
                    if spec.case_id not in seen:  # an entry that pins its dtype gives one case, not three
                        seen.add(spec.case_id)
                        specs.append(spec)
    return specs


WRITTEN_OUT = ("h = x.to(torch.float32)\n"
               "m = h.mean(-1, keepdim=True)\n"
               "v = ((h - m) ** 2).mean(-1, keepdim=True)\n"
               "return (w * ((h - m) * torch.rsqrt(v + eps)) + b).to(x.dtype)")
STATISTIC_ROWS = (1000, 4096)
STATISTIC_OFFSET = 1000.0


def statistic_cases(quick: bool = False) -> list[CaseSpec]:
    """A layer norm whose float32 statistics are written out, on long rows offset by 1000 (none for `quick`)."""
    if quick:
        return []
    return [CaseSpec.from_dict({"pattern": "layer_norm", "dtype": dtype, "shape": [4, n], "program": WRITTEN_OUT,
                                "params": {"kind": "normal"},
                                "input": {"kind": "offset", "offset": STATISTIC_OFFSET, "std": 1.0}})
            for dtype in ("float16", "bfloat16") for n in STATISTIC_ROWS]


_RMS = "h = F.rms_norm(x, (x.shape[-1],), w, eps)\n"
_LN = "h = F.layer_norm(x, (x.shape[-1],), w, b, eps)\n"
# name: (pattern, program, extra spec keys); x is [rows, D] unless the entry gives its shape
NEIGHBOURHOODS = {
    "norm-matmul": ("rms_norm", _RMS + "return h @ p", {"param_shapes": {"p": ["D", 32]}}),
    "norm-softmax": ("layer_norm", _LN + "return F.softmax(h * 4.0, dim=-1)", {}),
    "norm-gelu": ("layer_norm", _LN + "return F.gelu(h)", {}),
    "norm-gelu-tanh": ("layer_norm", _LN + "return F.gelu(h, approximate='tanh')", {}),
    "elu-norm-hardswish": ("layer_norm", "h = F.elu(x)\nreturn F.hardswish(F.layer_norm(h, (x.shape[-1],), w, b, eps))",
                           {}),
    "norm-cumsum": ("rms_norm", _RMS + "return h.cumsum(-1)", {}),
    "norm-rotary": ("rms_norm", _RMS + "d = h.shape[-1] // 2\n"
                    "return h * y + torch.cat([-h[..., d:], h[..., :d]], -1) * r",
                    {"inputs": {"y": {"kind": "normal"}, "r": {"kind": "normal"}}}),
    "pool-upsample-norm": ("group_norm", "h = F.interpolate(F.avg_pool2d(x, 2), scale_factor=2) + "
                           "F.max_pool2d(x, 3, stride=1, padding=1)\nreturn F.group_norm(h, 2, w, b, eps)",
                           {"shape": [2, 8, 8, 8], "param_shapes": {"w": [8], "b": [8]}}),
}
NEIGHBOURHOOD_ROWS = ([4, 256], [2, 1024])


def neighbourhood_cases(quick: bool = False) -> list[CaseSpec]:
    """Each neighbourhood in every dtype: normal rows short and long, the outlier and offset inputs short."""
    specs = []
    for name, (pattern, program, extra) in NEIGHBOURHOODS.items():
        rows = NEIGHBOURHOOD_ROWS[:1] if quick or "shape" in extra else NEIGHBOURHOOD_ROWS
        for dtype in DTYPES:
            for shape in rows:
                shape = extra.get("shape", shape)
                keys = {k: v for k, v in extra.items() if k != "shape"}
                if "param_shapes" in keys:
                    keys["param_shapes"] = {k: [shape[-1] if n == "D" else n for n in v]
                                            for k, v in keys["param_shapes"].items()}
                base = {"pattern": pattern, "dtype": dtype, "shape": shape, "params": {"kind": "normal"},
                        "program": program, **keys}
                variants = [base] if shape != rows[0] and "shape" not in extra else [
                    base, {**base, "input": OUTLIER},
                    {**base, "input": {"kind": "offset", "offset": LARGE_OFFSET[dtype], "std": 1.0}}]
                specs.extend(CaseSpec.from_dict(raw) for raw in variants)
    return specs


def module_cases(quick: bool = False) -> list[CaseSpec]:
    """A sample of the zoo (docs/contracts.md §9): the installed transformers' norm implementations that at least
    ZOO_MEMBERS library classes share (the ones most models run), as the zoo suite specs them (every
    dtype; a normal draw and the outlier input); none without transformers, none for `quick`."""
    if quick:
        return []
    from harness.zoo.catalog import default_inputs, installed, load_zoo
    from harness.zoo.synth import specs_of

    if not installed():
        return []
    picked = [e for e in load_zoo().entries if e.base is not None and len(e.members) >= ZOO_MEMBERS]
    return [CaseSpec.from_dict(raw) for e in picked for raw in specs_of(e.base, DTYPES, default_inputs)]


def cases(quick: bool = False) -> list[CaseSpec]:
    """The program benchmark's specs; `quick` keeps the short rows only (for tests)."""
    return (style_cases(quick) + nearmiss_cases(quick) + statistic_cases(quick) + neighbourhood_cases(quick)
            + module_cases(quick))
