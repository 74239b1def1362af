"""The near-miss catalog: norms written *almost* as a norm, and legitimate variants of one.

Pattern-matching rewrites (ExecuTorch's RecomposeRmsNorm, ONNX Runtime's
LayerNormFusion and SimplifiedLayerNormFusion, TVM's decompositions) must
leave a near miss alone or rewrite it exactly, and must take every legitimate
variant without changing its value. The classes come from the review of
pytorch/executorch#24428 (a scaled tensor that is not the squared one, a cube,
a product of two tensors, a multiply after the norm, narrowing casts in
between) and from the ways model code really writes a norm (the weight on
the other side, `sum / n`, `1 / sqrt`, `square()`, eps outside the root…).

Each entry is a program (docs/contracts.md §7) with the keys it needs; `suite` crosses
them with dtypes and inputs. `legit` entries must pass on every path: a
failure there is a rewrite that broke a correct program (or a compiler bug).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from harness.spec import CaseSpec

# The canonical Qwen RMSNorm as a program: every near miss below is it with one change.
QWEN = (
    "h = x.to(torch.float32)\n"
    "v = h.pow(2).mean(-1, keepdim=True)\n"
    "return w * (h * torch.rsqrt(v + eps)).to(x.dtype)"
)
POSITIVE = {"kind": "uniform", "low": 0.5, "high": 2.0}  # keeps a cube's or a product's mean positive


@dataclass(frozen=True)
class NearMiss:
    name: str          # a short id: nearmiss suite cases and the catalog refer to it
    legit: bool        # True: a correct program every path must pass; False: almost a norm
    what: str          # the one change from the canonical form, in words
    program: str
    pattern: str = "rms_norm"
    extra: dict = field(default_factory=dict)  # more spec keys (inputs, param_shapes, input, weight_dtype…)


CATALOG: tuple[NearMiss, ...] = (
    # -- near misses: a rewrite into one norm op changes the value ---------------------------
    NearMiss("scaled-not-squared", False, "scales another input (y) than the one it squares (x)",
             "h = x.to(torch.float32)\n"
             "v = h.pow(2).mean(-1, keepdim=True)\n"
             "return w * (y.to(torch.float32) * torch.rsqrt(v + eps)).to(x.dtype)",
             extra={"inputs": {"y": {"kind": "normal"}}}),
    NearMiss("scaled-copy", False, "scales a negated copy of the tensor it squares",
             "h = x.to(torch.float32)\n"
             "v = h.pow(2).mean(-1, keepdim=True)\n"
             "return w * (-h * torch.rsqrt(v + eps)).to(x.dtype)"),
    NearMiss("cube", False, "the mean of a cube instead of a square",
             "h = x.to(torch.float32)\n"
             "v = h.pow(3).mean(-1, keepdim=True)\n"
             "return w * (h * torch.rsqrt(v + eps)).to(x.dtype)",
             extra={"input": POSITIVE}),
    NearMiss("product-of-two", False, "the mean of x * y instead of x * x",
             "h = x.to(torch.float32)\n"
             "g = y.to(torch.float32)\n"
             "v = (h * g).mean(-1, keepdim=True)\n"
             "return w * (h * torch.rsqrt(v + eps)).to(x.dtype)",
             extra={"input": POSITIVE, "inputs": {"y": POSITIVE}}),
    NearMiss("mul-after", False, "another multiply (by s) after the weighted norm",
             QWEN.replace("return w * (h * torch.rsqrt(v + eps)).to(x.dtype)",
                          "return w * (h * torch.rsqrt(v + eps)).to(x.dtype) * s"),
             extra={"params": {"kind": "normal"}}),
    NearMiss("narrowing-cast", False, "rounds to float16 and normalises there, in a float32 model",
             "h = x.to(torch.float16)\n"
             "v = h.pow(2).mean(-1, keepdim=True)\n"
             "return w * (h * torch.rsqrt(v + eps)).to(torch.float32)",
             extra={"dtype": "float32", "params": {"kind": "normal"}}),
    NearMiss("residual-add", False, "a residual add of another input before the norm, scaling x itself",
             "h = (x + y).to(torch.float32)\n"
             "v = h.pow(2).mean(-1, keepdim=True)\n"
             "return w * (x.to(torch.float32) * torch.rsqrt(v + eps)).to(x.dtype)",
             extra={"inputs": {"y": {"kind": "normal"}}}),
    NearMiss("wrong-dim", False, "the mean over dim 0, not the normalized dim",
             QWEN.replace("h.pow(2).mean(-1, keepdim=True)", "h.pow(2).mean(0, keepdim=True)")),
    NearMiss("layer-norm-unshifted-scale", False, "subtracts the mean for the variance, scales x itself",
             "h = x.to(torch.float32)\n"
             "m = h.mean(-1, keepdim=True)\n"
             "v = (h - m).pow(2).mean(-1, keepdim=True)\n"
             "return (w * (h * torch.rsqrt(v + eps)) + b).to(x.dtype)",
             pattern="layer_norm", extra={"input": {"kind": "offset", "offset": 3.0, "std": 1.0}}),

    # -- legitimate variants: every path must pass them ---------------------------------------
    NearMiss("qwen", True, "the canonical Qwen RMSNorm", QWEN, extra={"params": {"kind": "normal"}}),
    NearMiss("weight-right", True, "the weight on the other side of the multiply",
             QWEN.replace("return w * (h * torch.rsqrt(v + eps)).to(x.dtype)",
                          "return (h * torch.rsqrt(v + eps)).to(x.dtype) * w"),
             extra={"params": {"kind": "normal"}}),
    NearMiss("sum-over-n", True, "sum / n instead of mean",
             QWEN.replace("h.pow(2).mean(-1, keepdim=True)", "h.pow(2).sum(-1, keepdim=True) / x.shape[-1]")),
    NearMiss("square-mul", True, "h * h instead of pow(2)",
             QWEN.replace("h.pow(2)", "(h * h)")),
    NearMiss("square-method", True, "square() instead of pow(2)",
             QWEN.replace("h.pow(2)", "h.square()")),
    NearMiss("one-over-sqrt", True, "1 / sqrt instead of rsqrt",
             QWEN.replace("h * torch.rsqrt(v + eps)", "h * (1 / torch.sqrt(v + eps))")),
    NearMiss("divide-by-sqrt", True, "a division by sqrt instead of a multiply by rsqrt",
             QWEN.replace("h * torch.rsqrt(v + eps)", "h / torch.sqrt(v + eps)")),
    NearMiss("pow-minus-half", True, "pow(-0.5) instead of rsqrt",
             QWEN.replace("torch.rsqrt(v + eps)", "(v + eps).pow(-0.5)")),
    NearMiss("eps-outside", True, "eps added outside the square root",
             QWEN.replace("h * torch.rsqrt(v + eps)", "h / (torch.sqrt(v) + eps)")),
    NearMiss("used-twice", True, "the normalized value used twice",
             "h = x.to(torch.float32)\n"
             "v = h.pow(2).mean(-1, keepdim=True)\n"
             "n = h * torch.rsqrt(v + eps)\n"
             "return w * (n + n * n).to(x.dtype)"),
    NearMiss("gemma-one-plus", True, "the weight as (1 + w), before the cast back",
             "h = x.float()\n"
             "v = h.pow(2).mean(-1, keepdim=True)\n"
             "return (h * torch.rsqrt(v + eps) * (1 + w.float())).type_as(x)",
             extra={"params": {"kind": "normal"}}),
    NearMiss("broadcast-weight", True, "a weight of shape [1, D] (broadcast over rows)",
             QWEN, extra={"params": {"kind": "normal"}, "param_shapes": {"w": [1, 64]}}),
    NearMiss("layer-norm-var", True, "layer norm with var(correction=0) written out in float32",
             "h = x.to(torch.float32)\n"
             "m = h.mean(-1, keepdim=True)\n"
             "v = h.var(-1, keepdim=True, correction=0)\n"
             "return (w * ((h - m) * torch.rsqrt(v + eps)) + b).to(x.dtype)",
             pattern="layer_norm", extra={"params": {"kind": "normal"}}),
    NearMiss("layer-norm-functional", True, "F.layer_norm on a float32 copy, cast back",
             "return F.layer_norm(x.float(), [x.shape[-1]], w.float(), b.float(), eps).type_as(x)",
             pattern="layer_norm", extra={"params": {"kind": "normal"}}),
)

SHAPE = [4, 64]  # rows long enough for a matcher to see a norm, short enough to compile fast


def names() -> list[str]:
    return [n.name for n in CATALOG]


def get(name: str) -> NearMiss:
    for n in CATALOG:
        if n.name == name:
            return n
    raise KeyError(f"unknown near miss {name!r}; known: {', '.join(names())}")


def spec_of(n: NearMiss, dtype: str = "float16", **more) -> dict:
    """The program spec of a catalog entry in `dtype` (an entry may pin its own dtype)."""
    spec = {"pattern": n.pattern, "dtype": dtype, "shape": list(SHAPE), "program": n.program}
    spec.update(n.extra)
    spec.update(more)
    if "param_shapes" in spec:  # a broadcast weight follows the row length
        spec["param_shapes"] = {k: v[:-1] + [spec["shape"][-1]] for k, v in spec["param_shapes"].items()}
    return spec


_BY_PROGRAM: dict[tuple[str, str], NearMiss] = {}


def _key(program: str, param_shapes) -> tuple[str, str]:
    return program, json.dumps({k: list(v) for k, v in dict(param_shapes or {}).items()}, sort_keys=True)


def entry_of(case: dict) -> NearMiss | None:
    """The catalog entry a (normalised) program case runs, by its program and parameter shapes, or None."""
    if case.get("program") is None:
        return None
    if not _BY_PROGRAM:
        for n in CATALOG:
            spec = CaseSpec.from_dict(spec_of(n))
            _BY_PROGRAM[_key(spec.program, spec.param_shapes_dict)] = n
    return _BY_PROGRAM.get(_key(case["program"], case.get("param_shapes")))
