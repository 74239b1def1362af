"""Named suites of case specs: smoke (fast, every pattern), nightly, full.

A suite is a deterministic list of specs; `normdiff cases --suite NAME`
prints it as JSON lines.
"""
from __future__ import annotations

from harness.spec import CaseSpec

# The two seeds and their controls come first: every suite must show them.
SEED_TVM = {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
            "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0}, "eps": 1e-5}
SEED_EXECUTORCH = {"pattern": "rms_norm", "style": "qwen", "cast": "to", "dtype": "float16",
                   "shape": [2, 8, 64], "params": {"kind": "normal"}}


def _smoke() -> list[dict]:
    specs: list[dict] = [SEED_TVM, {**SEED_TVM, "dtype": "float32"}, SEED_EXECUTORCH,
                         {**SEED_EXECUTORCH, "dtype": "bfloat16"}, {**SEED_EXECUTORCH, "dtype": "float32"}]
    for style in ("module", "upcast", "manual"):
        for dtype in ("float32", "float16", "bfloat16"):
            specs.append({"pattern": "layer_norm", "style": style, "dtype": dtype, "shape": [4, 256],
                          "params": {"kind": "normal"}})
    for style in ("module", "llama", "t5", "gemma"):
        for dtype in ("float16", "bfloat16"):
            specs.append({"pattern": "rms_norm", "style": style, "dtype": dtype, "shape": [4, 256],
                          "params": {"kind": "normal"}})
    specs += [
        {"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "weight_dtype": "float32",
         "shape": [2, 128], "params": {"kind": "normal"}},
        {"pattern": "group_norm", "dtype": "float16", "shape": [2, 8, 4, 4], "groups": 4,
         "params": {"kind": "normal"}},
        {"pattern": "group_norm", "dtype": "float32", "shape": [2, 8, 4, 4], "groups": 2,
         "layout": "channels_last"},
        {"pattern": "instance_norm", "dtype": "bfloat16", "shape": [2, 4, 16]},
        {"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3], "params": {"kind": "normal"}},
        {"pattern": "layer_norm", "dtype": "float16", "shape": [2, 512],
         "input": {"kind": "offset", "offset": 100, "std": 1}},
        {"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 256],
         "input": {"kind": "overflow", "magnitude": 300}},
        {"pattern": "layer_norm", "style": "upcast", "dtype": "bfloat16", "shape": [2, 256],
         "input": {"kind": "outlier", "std": 1, "scale": 100}},
    ]
    return specs


SUITES = {"smoke": _smoke}


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
