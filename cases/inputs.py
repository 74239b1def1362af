"""Inputs and parameters for a case, bit-identical in every process.

Values are drawn in float64 from NumPy's PCG64 generator seeded by the spec's
seed (input and parameters from independent streams), then rounded to the
case's dtype. The FP64 reference starts from those rounded values.

Each input kind stresses something reduced precision gets wrong:

- normal(mean, std): the benign baseline.
- alternating(amplitude, offset): -a, +a, -a, … plus o; E[x²]-E[x]² cancels
  when o is large against a, and a row mean of exactly o exposes any
  accumulation that is not exact (the TVM 20909 seed is a=0.25, o=0).
- uniform(low, high): bounded values; wide spans give large |mean|/std.
- constant(value): variance 0, so eps alone decides the output.
- outlier(std, scale): normal(0, std) with a few channels scale× larger, as
  in LLM activations; the sum of squares is dominated by a handful of terms.
- offset(offset, std): a large offset with a small spread; the mean must be
  subtracted exactly or the spread drowns (conditioning |mean|/std).
- overflow(magnitude): values around ±magnitude whose squares (and sums)
  overflow float16 (65504) while the normalized output is benign.
- tiny(scale): normal values times `scale`: subnormal in float16, squares
  underflow, so eps dominates the denominator.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.dtypes import cast
from harness.spec import CaseSpec


@dataclass(frozen=True)
class Inputs:
    """The rounded input `x` and parameters of a case (NumPy, case dtypes)."""

    x: np.ndarray
    params: dict[str, np.ndarray] = field(default_factory=dict)


def _rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, stream])))


def channel_axis(spec: CaseSpec) -> int:
    """The axis a norm's parameters run along: last for layer/rms, else 1."""
    return len(spec.shape) - 1 if spec.pattern in ("layer_norm", "rms_norm") else 1


def draw_x(spec: CaseSpec) -> np.ndarray:
    """The input in float64, before rounding to the case dtype."""
    p = spec.input_dict
    kind = p["kind"]
    shape = spec.shape
    rng = _rng(spec.seed, 0)
    n = int(np.prod(shape))
    if kind == "normal":
        x = rng.normal(p["mean"], p["std"], n)
    elif kind == "alternating":
        sign = np.where(np.arange(n) % 2 == 0, -1.0, 1.0)
        x = p["offset"] + p["amplitude"] * sign
    elif kind == "uniform":
        x = rng.uniform(p["low"], p["high"], n)
    elif kind == "constant":
        x = np.full(n, p["value"])
    elif kind == "offset":
        x = p["offset"] + rng.normal(0.0, p["std"], n)
    elif kind == "overflow":
        sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
        x = sign * p["magnitude"] * rng.uniform(0.5, 1.0, n)
    elif kind == "tiny":
        x = p["scale"] * rng.normal(0.0, 1.0, n)
    elif kind == "outlier":
        x = rng.normal(0.0, p["std"], n).reshape(shape)
        axis = channel_axis(spec)
        channels = shape[axis]
        count = max(1, min(4, channels // 16))
        picked = rng.choice(channels, size=count, replace=False)
        index = [slice(None)] * len(shape)
        index[axis] = np.sort(picked)
        x[tuple(index)] *= p["scale"]
        x = x.reshape(-1)
    else:  # pragma: no cover - the spec validated the kind
        raise ValueError(kind)
    return x.reshape(shape)


def draw_params(spec: CaseSpec) -> dict[str, np.ndarray]:
    """Weight, bias and (batch_norm) running statistics, in float64."""
    channels = spec.shape[channel_axis(spec)]
    if spec.pattern == "rms_norm" or spec.pattern == "layer_norm":
        channels = spec.shape[-1]
    ones = spec.params_dict["kind"] == "ones"
    rng = _rng(spec.seed, 1)
    out: dict[str, np.ndarray] = {}
    if spec.affine in ("weight", "weight_bias"):
        out["weight"] = np.ones(channels) if ones else rng.normal(0.0, 1.0, channels)
    if spec.affine == "weight_bias":
        out["bias"] = np.zeros(channels) if ones else rng.normal(0.0, 1.0, channels)
    if spec.pattern == "batch_norm":
        out["running_mean"] = np.zeros(channels) if ones else rng.normal(0.0, 1.0, channels)
        out["running_var"] = np.ones(channels) if ones else rng.uniform(0.5, 2.0, channels)
    return out


def make_inputs(spec: CaseSpec) -> Inputs:
    """The case's input and parameters, rounded to the spec's dtypes."""
    x = cast(draw_x(spec), spec.dtype)
    params = {k: cast(v, spec.weight_dtype) for k, v in draw_params(spec).items()}
    return Inputs(x=x, params=params)
