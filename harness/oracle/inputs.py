"""Inputs and parameters for a case, bit-identical in every process.

Values are drawn in float64 from NumPy's PCG64 generator seeded by the spec's
seed (input and parameters from independent streams), then rounded to the
case's dtype. The FP64 reference starts from those rounded values.

Each input kind is one function below whose docstring says what it stresses
(`describe(kind)` returns it). Benign kinds are the baseline; the others are
the inputs reduced precision gets wrong. Long rows are a matter of the shape
(the suites carry rows of 4096+ elements and one over 65,504, the largest
float16, so an element count kept in float16 overflows).
"""
from __future__ import annotations

import inspect
import types
import zlib
from dataclasses import dataclass, field
from typing import Callable

import ml_dtypes
import numpy as np

from harness.core import captured
from harness.core.dtypes import cast, np_dtype
from harness.program.ir import ones_value
from harness.spec import CaseSpec
from harness.spec.keys import CAPTURED


@dataclass(frozen=True)
class Inputs:
    """The rounded input `x`, a program's extra inputs and the parameters of a case (NumPy, case dtypes)."""

    x: np.ndarray
    params: dict[str, np.ndarray] = field(default_factory=dict)
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # a program's y, r; a module's forward arguments
    order: tuple[str, ...] | None = None  # the extra inputs in call order (None: sorted, a program's forward)
    cotangents: tuple[np.ndarray, ...] = ()  # a gradient case's: one per forward output (draw_cotangents)

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """Every input by the name a program reads it under."""
        return {"x": self.x, **self.extra}

    @property
    def run_arg(self):
        """What a path's `Prepared.run` takes: `x`, or (x, then the extra inputs in call order, then a gradient
        case's cotangents)."""
        args = (*self.forward_arg, *self.cotangents)
        return args if len(args) > 1 else self.x

    @property
    def forward_arg(self) -> tuple:
        """The forward's inputs alone, in call order (run_arg without the cotangents), always a tuple."""
        order = self.order if self.order is not None else tuple(sorted(self.extra))
        return (self.x, *(self.extra[k] for k in order))


def _rng(seed: int, stream: int, name: str | None = None) -> np.random.Generator:
    """The generator of one stream of a case; a named input or parameter has a stream of its own."""
    words = [seed, stream] if name is None else [seed, stream, zlib.crc32(name.encode())]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))


def channel_axis(spec: CaseSpec) -> int:
    """The axis a norm's parameters run along: last for layer/rms, else 1."""
    return len(spec.shape) - 1 if spec.pattern in ("layer_norm", "rms_norm") else 1


# -- the kinds: (rng, element count, parameters, spec) -> flat float64 ------

def normal(rng, n, p, spec):
    """normal(mean, std): the benign baseline, well conditioned for every dtype."""
    return rng.normal(p["mean"], p["std"], n)


def alternating(rng, n, p, spec):
    """alternating(amplitude, offset): -a, +a, -a, … plus o (in flat order).

    Every row of even length has mean exactly o and variance a², so any
    accumulation that is not exact shows (the TVM 20909 seed is a=0.25, o=0).
    A large o against a makes the one-pass variance E[x²]-E[x]² cancel
    catastrophically (apache/tvm#19592 was [80000, 80001, 80002, 80003]).
    """
    sign = np.where(np.arange(n) % 2 == 0, -1.0, 1.0)
    return p["offset"] + p["amplitude"] * sign


def uniform(rng, n, p, spec):
    """uniform(low, high): bounded benign values; a span off zero gives |mean| ~ std."""
    return rng.uniform(p["low"], p["high"], n)


def constant(rng, n, p, spec):
    """constant(value): every row constant, variance 0, so eps alone decides.

    A layer_norm must give exactly its bias; any error in the mean is divided
    by sqrt(eps) (x316 at eps 1e-5). A value that is not a power of two (0.1)
    makes a mean that is not computed exactly visible.
    """
    return np.full(n, p["value"])


def outlier(rng, n, p, spec):
    """outlier(std, scale): normal(0, std) with a few channels scale× larger.

    As in LLM activations: the same 1-4 channels (of the parameter axis) are
    large in every row, so a handful of terms dominate the sum of squares and
    their float16 squares overflow while the rest of the row is ordinary.
    """
    shape = spec.shape
    x = rng.normal(0.0, p["std"], n).reshape(shape)
    axis = channel_axis(spec)
    channels = shape[axis]
    picked = rng.choice(channels, size=outlier_count(channels), replace=False)
    index = [slice(None)] * len(shape)
    index[axis] = np.sort(picked)
    x[tuple(index)] *= p["scale"]
    return x.reshape(-1)


def outlier_count(channels: int) -> int:
    """How many outlier channels a row of `channels` gets: 1 to 4."""
    return max(1, min(4, channels // 16))


def offset(rng, n, p, spec):
    """offset(offset, std): a large offset with a small spread.

    The mean must be subtracted exactly or the spread drowns: the row's
    conditioning |mean|/std is offset/std, and a one-pass E[x²]-E[x]² loses
    log2((offset/std)²) bits of the variance.
    """
    return p["offset"] + rng.normal(0.0, p["std"], n)


def overflow(rng, n, p, spec):
    """overflow(magnitude): values ±magnitude·U(0.5, 1) with random signs.

    Squares (magnitude ≥ 256) and row sums of squares overflow float16
    (65,504) while the normalized output is benign: a norm that squares or
    sums in float16 returns inf, NaN or 0.
    """
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return sign * p["magnitude"] * rng.uniform(0.5, 1.0, n)


def tiny(rng, n, p, spec):
    """tiny(scale): normal values times `scale` (1e-6: subnormal in float16).

    Squares underflow float16 (below 6e-8) though not float32, and the
    variance falls under eps, so eps dominates the denominator: a norm that
    squares in float16 or drops eps gives 0 or inf.
    """
    return p["scale"] * rng.normal(0.0, 1.0, n)


def subnormal(rng, n, p, spec):
    """subnormal(fraction): that fraction of elements random subnormals of the case dtype.

    The rest are normal(0, 1). Stresses flush-to-zero / denormals-are-zero
    in compiled code and kernels: with fraction 1 the row's variance is far
    under eps, so the output is x/sqrt(eps) and a flushed input gives 0
    where the reference is a normal number (float16) or a tiny one.
    """
    info = ml_dtypes.finfo(np_dtype(spec.dtype))
    smallest = float(info.smallest_subnormal)
    below_normal = round(float(info.smallest_normal) / smallest)  # subnormals: 1..2**bits - 1 steps
    steps = rng.integers(1, below_normal, n).astype(np.float64)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    picked = rng.random(n) < p["fraction"]
    return np.where(picked, sign * steps * smallest, rng.normal(0.0, 1.0, n))


KINDS: dict[str, Callable] = {
    "normal": normal, "alternating": alternating, "uniform": uniform, "constant": constant,
    "outlier": outlier, "offset": offset, "overflow": overflow, "tiny": tiny, "subnormal": subnormal,
}
BENIGN = ("normal", "uniform")


def describe(kind: str) -> str:
    """What input kind `kind` stresses (its docstring)."""
    return inspect.getdoc(KINDS[kind])


def draw_x(spec: CaseSpec) -> np.ndarray:
    """The input in float64, before rounding to the case dtype (a captured tensor: its values, exact in float64)."""
    p = spec.input_dict
    if p["kind"] == CAPTURED:
        return captured.load(p["sha256"], spec.shape, spec.dtype).astype(np.float64)
    n = int(np.prod(spec.shape))
    return KINDS[p["kind"]](_rng(spec.seed, 0), n, p, spec).reshape(spec.shape)


# Each extra input of a program draws from its own stream (x is 0, the parameters 1); y and r have
# numbered streams, any other name (a module's forward argument) the stream NAMED keyed by its name.
EXTRA_STREAMS = {"y": 2, "r": 3}
NAMED = 4
COTANGENT = 5  # a gradient case's cotangents: output k draws from this stream keyed by k


def extra_type(spec: CaseSpec, name: str) -> tuple[tuple[int, ...], str]:
    """(shape, dtype) of an extra input: its object's own, else x's."""
    obj = spec.inputs_dict[name]
    return tuple(obj.get("shape", spec.shape)), obj.get("dtype", spec.dtype)


def draw_extra(spec: CaseSpec) -> dict[str, np.ndarray]:
    """The extra inputs (x's shape and dtype unless their objects give their own), in float64."""
    out = {}
    for name, p in spec.inputs_dict.items():
        shape, dtype = extra_type(spec, name)
        rng = _rng(spec.seed, EXTRA_STREAMS[name]) if name in EXTRA_STREAMS else _rng(spec.seed, NAMED, name)
        out[name] = KINDS[p["kind"]](rng, int(np.prod(shape)), p, kind_target(spec, shape, dtype)).reshape(shape)
    return out


def draw_cotangents(spec: CaseSpec, types) -> tuple[np.ndarray, ...]:
    """A gradient case's cotangents, rounded: one per forward output, of that output's (shape, dtype) in `types`,
    drawn by the spec's `cotangent` input object from a stream of its own (COTANGENT, keyed by the output's
    position), so neither the input nor the parameters change when a case asks for its gradients."""
    p = spec.cotangent_dict
    out = []
    for k, (shape, dtype) in enumerate(types):
        shape = tuple(int(n) for n in shape)
        drawn = KINDS[p["kind"]](_rng(spec.seed, COTANGENT, str(k)), int(np.prod(shape)), p,
                                  kind_target(spec, shape, dtype))
        out.append(cast(drawn.reshape(shape), dtype))
    return tuple(out)


def kind_target(spec: CaseSpec, shape: tuple[int, ...], dtype: str):
    """What a kind reads of a spec (shape, dtype, pattern) for a tensor of its own (shape, dtype): the spec
    itself when they are x's."""
    if (tuple(shape), dtype) == (tuple(spec.shape), spec.dtype):
        return spec
    return types.SimpleNamespace(shape=shape, dtype=dtype, pattern=spec.pattern)


def draw_named_params(kind: str, seed: int, shapes, values=None) -> dict[str, np.ndarray]:
    """Parameters by name, in float64: `ones` gives 1, or 0 to a shift (b, a bias, a mean); `normal` draws
    N(0, 1), and U(0.5, 2) for a variance (a running_var must stay positive). w, b and s draw in that order from
    the parameters' stream; every other name from a stream of its own, so a module's parameters and its lifted
    program's draw the same values whatever else either holds."""
    rng = _rng(seed, 1)
    out: dict[str, np.ndarray] = {}
    for name, shape in shapes:
        shape = tuple(shape)
        if kind in ("ones", "fill"):  # fill: the values given, the others as ones gives them
            out[name] = np.full(shape, (values or {}).get(name, ones_value(name)))
            continue
        source = rng if name in ("w", "b", "s") else _rng(seed, 1, name)
        if "var" in name.lower():
            out[name] = source.uniform(0.5, 2.0, int(np.prod(shape))).reshape(shape)
        else:
            out[name] = source.normal(0.0, 1.0, int(np.prod(shape))).reshape(shape)
    return out


def draw_program_params(spec: CaseSpec) -> dict[str, np.ndarray]:
    """A program's parameters (draw_named_params, in param_order)."""
    params = spec.params_dict
    return draw_named_params(params["kind"], spec.seed, spec.param_shapes, params.get("values"))


def draw_params(spec: CaseSpec) -> dict[str, np.ndarray]:
    """Weight, bias and (batch_norm) running statistics, in float64 (a module case's are in its module)."""
    if spec.is_module:
        return {}
    if spec.program is not None:
        return draw_program_params(spec)
    channels = spec.shape[channel_axis(spec)]
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
    extra = {k: cast(v, extra_type(spec, k)[1]) for k, v in draw_extra(spec).items()}
    return Inputs(x=x, params=params, extra=extra)
