"""What the tests share: the project root, the real command line, small records, baselines and specs.

Tests import from here (`from helpers import …`; pytest puts tests/ on the
path), never from one another.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from harness.spec import CaseSpec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = os.path.join(ROOT, "cases", "seeds")
BASELINE = os.path.join(ROOT, "reports", "baseline.json")


def normdiff(*args, cwd=None, timeout=900, env=None):
    """Run the real command line in a fresh interpreter, as a user would."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, timeout=timeout, env=full_env)


def seed(name: str) -> str:
    """The path of a seed spec under cases/seeds/."""
    return os.path.join(SEEDS, name)


# Small specs, records and baseline entries for the gate and the reports.
SPECS = {name: CaseSpec.from_dict(raw) for name, raw in {
    "a": {"pattern": "layer_norm", "dtype": "float16", "shape": [2, 64]},
    "b": {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
          "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0}},
    "c": {"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 8, 64], "params": {"kind": "normal"}},
    "d": {"pattern": "layer_norm", "style": "manual", "dtype": "bfloat16", "shape": [2, 64]},
    "e": {"pattern": "group_norm", "dtype": "float32", "shape": [2, 8, 4, 4], "groups": 2},
    "f": {"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3]},
}.items()}


def record(name, path, verdict, message=None):
    spec = SPECS[name]
    return {"case_id": spec.case_id, "case": spec.to_dict(), "path": path, "verdict": verdict,
            "stage": "compile" if verdict == "error" else None, "message": message or f"{verdict} on {path}",
            "max_abs_err": None if verdict == "error" else 0.1, "max_rel_err": None, "max_ulp": 3.0,
            "worst_row": 0, "eager_max_abs_err": 1e-4, "out_dtype": spec.dtype, "expected_dtype": spec.dtype,
            "seconds": 0.5, "versions": {"torch": "2.13.0+cpu"}}


def entry(name, path, verdict, upstream="new", reason="a hand-written reason"):
    spec = SPECS[name]
    return {"case_id": spec.case_id, "path": path, "verdict": verdict, "upstream": upstream,
            "reason": reason, "case": spec.to_dict()}


def write_results(tmp_path, records):
    p = tmp_path / "results.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(p)


def write_baseline(tmp_path, entries, name="baseline.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"format": "normdiff-baseline", "version": 1, "entries": entries}, indent=1))
    return str(p)
