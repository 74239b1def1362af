"""The benchmark's cases: every norm the implementations compute, every dtype, every input kind.

The inputs are the nightly suite's variants for each dtype (two benign, the
rest adversarial: every kind of harness.oracle.inputs.KINDS) plus each kind's
spec default where it differs (offset 1000 for every dtype), crossed with both
parameter draws (ones; normal weight and bias) and with short, long and odd
row lengths. A float32 weight under a float16/bfloat16 input (the mixed
models) is a structure of its own. Nothing here is chosen from the
oracle's verdicts: the grid is the suites' factors, taken whole.
"""
from __future__ import annotations

from cases.suites import inputs_for
from harness.core.dtypes import DTYPES
from harness.spec import INPUT_KINDS, CaseSpec

# (pattern, shape, extra spec keys): rows of 256, 4096 and an odd 1023 for layer/rms norms
STRUCTURES = [
    ("layer_norm", [4, 256], {}),
    ("layer_norm", [2, 4096], {}),
    ("layer_norm", [3, 1023], {}),
    ("rms_norm", [4, 256], {}),
    ("rms_norm", [2, 4096], {}),
    ("rms_norm", [3, 1023], {}),
    ("group_norm", [2, 8, 4, 8], {"groups": 2}),
    ("instance_norm", [2, 4, 96], {}),
]
# rows over 65,504 elements (a float16 count overflows), on the benign and the seed's input
LONG = [("layer_norm", [1, 65536]), ("rms_norm", [1, 65536])]
LONG_INPUTS = [{"kind": "normal"}, {"kind": "alternating", "amplitude": 0.25, "offset": 0.0}]
PARAMS = ("ones", "normal")
# Long rows get several draws: how sequential rounding errors add up (randomly or
# coherently) varies from draw to draw, and one draw can be a lucky one.
LONG_ROW_SEEDS = (0, 1, 2, 3)


def inputs(dtype: str) -> list[dict]:
    """The suites' input variants for `dtype`, plus each kind's default where the suites use another."""
    out = list(inputs_for(dtype))
    for kind, defaults in INPUT_KINDS.items():
        default = {"kind": kind, **defaults}
        if default not in out and kind in ("offset", "outlier"):
            out.append(default)
    return out


def cases(quick: bool = False) -> list[CaseSpec]:
    """The benchmark's specs; `quick` keeps the short rows only (for tests)."""
    specs = []
    for pattern, shape, extra in STRUCTURES:
        if quick and max(shape[-1], shape[-2]) > 256:
            continue
        for dtype in DTYPES:
            for weight_dtype in dict.fromkeys((dtype, "float32")):
                for params in PARAMS:
                    if weight_dtype != dtype and (params == "ones" or shape[-1] != 256):
                        continue  # mixed models: the short rows with drawn weights
                    for inp in inputs(dtype):
                        for seed in (LONG_ROW_SEEDS if shape[-1] >= 4096 else (0,)):
                            specs.append(CaseSpec.from_dict({
                                "pattern": pattern, "dtype": dtype, "weight_dtype": weight_dtype,
                                "shape": shape, "params": {"kind": params}, "input": inp,
                                "seed": seed, **extra}))
    if not quick:
        for pattern, shape in LONG:
            for dtype in ("float16", "bfloat16"):
                for inp in LONG_INPUTS:
                    specs.append(CaseSpec.from_dict({"pattern": pattern, "dtype": dtype, "shape": shape,
                                                     "input": inp}))
    return specs
