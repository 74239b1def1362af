"""The neighbourhood generator: each catalog norm wrapped in the ops real models put around it, as programs.

Compilers do not see a norm alone: their pattern matchers look at the ops
around it, and most reported norm bugs with a CPU repro are about those ops
(issue 39): a residual add fused into the norm (onnxruntime#27455, vLLM's two
rounding contracts, vllm#52104), a multiply after it absorbed into the norm's
weight (onnxruntime#31980, pytorch/executorch#24428 item 1), a projection after
a rebuilt float32 norm, BatchNorm -> ELU -> GroupNorm under Inductor
(pytorch#181696/#183120). Each neighbour is written here as data, a template
of program lines (docs/contracts.md §7), so the FP64 reference and the error
bound of the whole neighbourhood come from the language, as for any program.

A norm is a catalog (pattern, style, cast) written as its program
(harness.program.styles) and wrapped as

    [before lines: pre = f(x)]  the norm reads `pre` where it reads x's values
    nrm = <the norm's return>   (x's dtype and `type_as(x)` still name the model's dtype)
    [after lines]  return g(nrm)

Neighbours whose ops the language does not have yet sit in the same table
with the ops they need; `active()` holds those the op table
(harness.program.ops) has, `pending()` the others with the reason, and the
`context` suite (cases/suites.py) says which are pending: none is dropped
silently. Everything here is deterministic: the same table gives the same
programs and specs in any process.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.program import ops
from harness.program.styles import STYLE_CASTS, style_program

SHAPE = (2, 8, 64)   # [batch, tokens, hidden]: 3-D, as onnxruntime#27455 needs; rows long enough to match
HEADS = 4            # QK-norm: 64 = 4 heads of 16
GROUPS = 4           # group norm over the 8 channels of dim 1


@dataclass(frozen=True)
class Norm:
    """A catalog norm as a program: its pattern, style and cast style (None: a style that does not cast)."""

    pattern: str
    style: str
    cast: str | None = None

    @property
    def key(self) -> str:
        return "/".join(p for p in (self.pattern, self.style, self.cast) if p)

    @property
    def upcasts(self) -> bool:
        """Whether the norm's own text takes its input to float32 (and casts back to x's dtype)."""
        return self.style in STYLE_CASTS and STYLE_CASTS[self.style] is not None

    def source(self, dtype: str, affine: str | None = None) -> str:
        """The norm's program text (reads x, w, b, eps)."""
        if self.pattern == "group_norm":
            w, b = ("None", "None") if affine == "none" else ("w", "b")
            return f"return F.group_norm(x, {GROUPS}, {w}, {b}, eps)"
        return style_program(self.pattern, self.style, self.cast, affine, dtype)

    def params(self, affine: str | None = None) -> tuple[str, ...]:
        """The norm's own parameters (they have the normalized dim's shape, or the channels' for group norm)."""
        if affine == "none":
            return ()
        return ("w",) if self.pattern == "rms_norm" else ("w", "b")


# Every catalog norm that has a program: the layer/rms styles (each casting style in every cast style)
# and group norm (F.group_norm). instance_norm and batch_norm have none: the language has no
# F.instance_norm / F.batch_norm with running statistics (NOT_WRAPPED says so).
def catalog_norms() -> tuple[Norm, ...]:
    from harness.spec import CASTS, CATALOG_STYLES, STYLES

    out = []
    for pattern in ("layer_norm", "rms_norm"):
        for style in CATALOG_STYLES:
            patterns, default_cast = STYLES[style]
            if pattern in patterns:
                out += [Norm(pattern, style, c) for c in (CASTS if default_cast else (None,))]
    return tuple(out) + (Norm("group_norm", "module"),)


NOT_WRAPPED = {"instance_norm": "no program form: the language has no F.instance_norm",
               "batch_norm": "no program form: the language has no F.batch_norm (running statistics)"}


@dataclass(frozen=True)
class Neighbour:
    """One neighbour template: program lines around a norm, and what it needs."""

    name: str
    where: str                      # "before" (lines make `pre` from x) or "after" (lines read nrm, end in return)
    what: str                       # in words: what real models do
    lines: tuple[str, ...]
    upstream: tuple[str, ...] = ()  # the reports it is the neighbourhood of
    inputs: tuple[str, ...] = ()    # extra inputs it reads (x's shape and dtype, a normal draw)
    params: dict = field(default_factory=dict)  # parameter -> shape ("D": the row; "T,D": tokens x row; ints)
    ops: tuple[str, ...] = ()       # op names of harness.program.ops it needs (pending until the table has them;
                                    # named as the ops branch's table names them: avg_pool1d, matmul, gelu...)
    patterns: tuple[str, ...] = ("layer_norm", "rms_norm", "group_norm")
    needs_upcast: bool = False      # only around a norm that casts to float32 itself
    affine: str | None = None       # the norm's affine (None: the pattern's default)
    shape: tuple[int, ...] | None = None  # its own input shape (None: SHAPE)
    norm_params: dict = field(default_factory=dict)  # the norm's parameter shapes where they are not the row's
    suite_norms: tuple = ()         # the norms the context suite puts it around (default: in turn, suite_pairs)
    styles: tuple[str, ...] = ()    # only around these styles (a weight of another shape: a norm written out)
    fuzz: bool = True               # `fuzz --programs` may draw it around any mutated norm
    min_row: int = 1                # the shortest row it fits (a pool's kernel needs that many elements)


# -- the table --------------------------------------------------------------------------------------
_BN = ("bn = (x - bm[:, None]) * torch.rsqrt(bv[:, None] * bv[:, None] + eps) * bw[:, None] + bb[:, None]",)

TABLE: tuple[Neighbour, ...] = (
    # -- before the norm ------------------------------------------------------------------------------
    Neighbour("residual-dtype", "before", "a residual add in the model's dtype (a pre-norm block)",
              ("pre = x + r",), ("microsoft/onnxruntime#27455", "vllm-project/vllm#52104"), inputs=("r",)),
    Neighbour("residual-float32", "before", "the residual add in float32, the norm on the float32 sum "
              "(vLLM's native fused_add_rms_norm path)",
              ("pre = x.to(torch.float32) + r.to(torch.float32)",), ("vllm-project/vllm#52104",), inputs=("r",),
              needs_upcast=True),
    Neighbour("residual-rounded", "before", "the residual add in float32, rounded to the dtype before the "
              "statistic (vLLM's fused kernel)",
              ("pre = (x.to(torch.float32) + r.to(torch.float32)).to(x.dtype)",), ("vllm-project/vllm#52104",),
              inputs=("r",)),
    Neighbour("residual-3d-weight", "before", "a residual add before a layer norm written out whose weight and "
              "bias are [1, 1, D] (a 3-D model's parameters; the repro of onnxruntime#27455)",
              ("pre = x + r",), ("microsoft/onnxruntime#27455",), inputs=("r",), patterns=("layer_norm",),
              norm_params={"w": (1, 1, SHAPE[-1]), "b": (1, 1, SHAPE[-1])}, styles=("manual",),
              suite_norms=(Norm("layer_norm", "manual"),)),
    Neighbour("bias-before", "before", "a bias add (a projection's bias) before the norm",
              ("pre = x + c",), params={"c": "D"}),
    Neighbour("silu-before", "before", "an activation (SiLU) before the norm", ("pre = F.silu(x)",)),
    Neighbour("relu-before", "before", "an activation (ReLU) before the norm", ("pre = torch.relu(x)",)),
    Neighbour("qk-heads", "before", "a reshape into heads, the norm per head (QK-norm), back to tokens x heads",
              (f"pre = x.reshape(x.shape[0], x.shape[1], {HEADS}, -1)",), patterns=("layer_norm", "rms_norm"),
              norm_params={"w": (SHAPE[-1] // HEADS,), "b": (SHAPE[-1] // HEADS,)}),
    # -- after the norm -------------------------------------------------------------------------------
    Neighbour("scale-dtype", "after", "a second scale in the dtype, the weight's shape (a gate, a layer scale)",
              ("return nrm * s",), ("pytorch/executorch#24428",), params={"s": "D"}),
    Neighbour("scale-float32", "after", "a second scale in float32",
              ("return nrm.to(torch.float32) * s.to(torch.float32)",), ("pytorch/executorch#24428",),
              params={"s": "D"}),
    Neighbour("scale-rows", "after", "a second scale of another shape that broadcasts (one per token, [T, 1]): "
              "it does not fit the norm's weight",
              ("return nrm * s",), ("microsoft/onnxruntime#31980",), params={"s": "T,1"}),
    Neighbour("scale-expand", "after", "a norm over rows of one element, then a scale [D] that expands them "
              "(the repro of onnxruntime#31980)",
              ("return nrm * s",), ("microsoft/onnxruntime#31980",), params={"s": (SHAPE[-1],)},
              patterns=("layer_norm", "rms_norm"), affine="none", shape=(SHAPE[0] * SHAPE[1], 1),
              suite_norms=(Norm("rms_norm", "qwen", "to"), Norm("layer_norm", "manual"))),
    Neighbour("linear-after", "after", "a Linear (F.linear) after the norm: the next projection",
              ("return F.linear(nrm, lw, lb)",), params={"lw": "D,D", "lb": "D"},
              # the Llama norm then a float16 projection: issue 39's "fails later" on executorch-recompose
              suite_norms=(Norm("rms_norm", "llama", "type_as"), Norm("group_norm", "module")),
              fuzz=False),  # F.linear wants its weight in nrm's dtype, which a mutated cast back changes
    Neighbour("silu-after", "after", "an activation (SiLU) after the norm", ("return F.silu(nrm)",)),
    Neighbour("relu-after", "after", "an activation (ReLU) after the norm", ("return torch.relu(nrm)",)),
    Neighbour("rotary-after", "after", "a rotary rotate (rotate_half by slicing and cat) after the norm",
              ("nrm1 = nrm.narrow(-1, 0, {half})",
               "nrm2 = nrm.narrow(-1, {half}, {rest})",
               "return nrm * cs + torch.cat([-nrm2, nrm1], dim=-1) * sn"), params={"cs": "T,D", "sn": "T,D"},
              min_row=2),  # rotate_half of a row of 1 rotates nothing
    Neighbour("residual-after", "after", "a residual add after the norm", ("return nrm + r",), inputs=("r",)),
    Neighbour("cast-after", "after", "a cast of the norm's output (to float32; a float32 model to bfloat16)",
              ("return nrm.to({cast_to})",)),
    # -- pending: ops the language does not have yet (issue 39 deliverable 2) -------------------------
    Neighbour("bn-elu-groupnorm", "before", "an eval BatchNorm, then ELU, then the GroupNorm",
              _BN + ("pre = F.elu(bn)",), ("pytorch/pytorch#181696", "pytorch/pytorch#183120"),
              params={"bm": "C", "bv": "C", "bw": "C", "bb": "C"}, ops=("elu",), patterns=("group_norm",)),
    Neighbour("gelu-after", "after", "GELU (erf) after the norm", ("return F.gelu(nrm)",), ops=("gelu",)),
    Neighbour("gelu-tanh-after", "after", "GELU (tanh form) after the norm",
              ("return F.gelu(nrm, approximate='tanh')",), ops=("gelu",)),
    Neighbour("hardswish-after", "after", "hardswish after the norm", ("return F.hardswish(nrm)",),
              ("pytorch/pytorch#183601",), ops=("hardswish",)),
    Neighbour("pool-hardswish", "after", "a pool, then hardswish (InstanceNorm2d -> pool -> hardswish)",
              ("pool = F.avg_pool1d(nrm, kernel_size=2)", "return F.hardswish(pool)"), ("pytorch/pytorch#183601",),
              ops=("avg_pool1d", "hardswish"), min_row=2),
    Neighbour("softmax-after", "after", "a softmax over the row after the norm", ("return torch.softmax(nrm, dim=-1)",),
              ops=("softmax",)),
    Neighbour("qk-scores", "after", "attention scores after QK-norm: n @ n^T", ("return nrm @ nrm.transpose(-1, -2)",),
              ops=("matmul",)),
)

BY_NAME: dict[str, Neighbour] = {n.name: n for n in TABLE}


def missing_ops(nb: Neighbour) -> tuple[str, ...]:
    """The ops `nb` needs that the op table does not have."""
    return tuple(o for o in nb.ops if o not in ops.BY_NAME)


def active() -> tuple[Neighbour, ...]:
    return tuple(n for n in TABLE if not missing_ops(n))


def pending() -> tuple[tuple[Neighbour, str], ...]:
    """(neighbour, why) for every template the language cannot hold yet."""
    return tuple((n, f"needs op {', '.join(missing_ops(n))}, not in harness.program.ops")
                 for n in TABLE if missing_ops(n))


def applies(nb: Neighbour, norm: Norm) -> bool:
    """Whether the neighbour is one real models put around this norm."""
    return (norm.pattern in nb.patterns and (norm.upcasts or not nb.needs_upcast)
            and (not nb.styles or norm.style in nb.styles))


# -- rendering -------------------------------------------------------------------------------------
# x's values, not its dtype: `x.dtype` and `.type_as(x)` keep naming the model's dtype (vLLM's native
# path casts the float32 sum back to the model's dtype), `x.shape` follows the norm's input.
_VALUE_X = re.compile(r"(?<!type_as\()\bx\b(?!\.dtype)")
_RETURN = re.compile(r"^return (.*)$", re.M)


def _dims(spec: str | tuple, shape: tuple[int, ...]) -> list[int]:
    if isinstance(spec, tuple):
        return list(spec)
    sizes = {"D": shape[-1], "T": shape[-2] if len(shape) > 2 else shape[0], "C": shape[1]}
    return [sizes[p] if p in sizes else int(p) for p in spec.split(",")]


def wrap(nb: Neighbour, source: str, dtype: str, shape: tuple[int, ...]) -> str:
    """A norm program's text `source` (reading x) with neighbour `nb` around it, for inputs of `shape`."""
    if nb.where == "before":
        return "\n".join(list(nb.lines) + [_VALUE_X.sub("pre", source)])
    body = _RETURN.sub(r"nrm = \1", source)
    fill = {"cast_to": "torch.bfloat16" if dtype == "float32" else "torch.float32",
            "half": shape[-1] // 2, "rest": shape[-1] - shape[-1] // 2}
    return "\n".join([body] + [line.format(**fill) for line in nb.lines])


def program(nb: Neighbour, norm: Norm, dtype: str) -> str:
    """The program text of `norm` in dtype `dtype` with neighbour `nb` around it."""
    return wrap(nb, norm.source(dtype, nb.affine), dtype, nb.shape or SHAPE)


def extras(nb: Neighbour, shape: tuple[int, ...]) -> tuple[dict, dict]:
    """(extra inputs, parameter shapes) the neighbour's own lines read, for inputs of `shape`."""
    return ({name: {"kind": "normal"} for name in nb.inputs},
            {p: _dims(s, tuple(shape)) for p, s in nb.params.items()})


def spec_of(nb: Neighbour, norm: Norm, dtype: str, *, input: dict | None = None, params: str = "normal") -> dict:
    """The program case (a raw spec) of `norm` in `dtype` wrapped in `nb`."""
    shape = nb.shape or SHAPE
    raw: dict = {"pattern": norm.pattern, "dtype": dtype, "shape": list(shape), "program": program(nb, norm, dtype),
                 "params": {"kind": params}}
    if input:
        raw["input"] = input
    inputs, shapes = extras(nb, shape)
    if inputs:
        raw["inputs"] = inputs
    norm_shape = [shape[1]] if norm.pattern == "group_norm" else None
    for p in norm.params(nb.affine):
        if p in nb.norm_params:
            shapes[p] = list(nb.norm_params[p])
        elif norm_shape:
            shapes[p] = norm_shape
    if shapes:
        raw["param_shapes"] = shapes
    return raw


def fuzzable() -> tuple[Neighbour, ...]:
    """The active neighbours that fit any 2-D layer/rms norm program as it is (`fuzz --programs` draws them
    around its mutated norms): no shape, affine or parameter shape of their own."""
    return tuple(n for n in active() if {"layer_norm", "rms_norm"} <= set(n.patterns) and n.shape is None
                 and n.affine is None and not n.norm_params and n.fuzz)


def describe(nb: Neighbour) -> str:
    """One line: the neighbour, where, what, and the reports it is the neighbourhood of."""
    ups = f" ({', '.join(nb.upstream)})" if nb.upstream else ""
    return f"{nb.name} [{nb.where}]: {nb.what}{ups}"


# -- the context suite's selection ------------------------------------------------------------------
# A few norms per neighbour: the Qwen RMSNorm (the seed's, vLLM's) wherever it applies, and one more
# in turn from the others (every style once or more over the table), each in the three dtypes.
SUITE_NORMS = (Norm("rms_norm", "qwen", "to"), Norm("layer_norm", "module"), Norm("rms_norm", "llama", "type_as"),
               Norm("layer_norm", "upcast", "float"), Norm("group_norm", "module"), Norm("rms_norm", "gemma", "type_as"),
               Norm("layer_norm", "manual"), Norm("rms_norm", "t5", "to"), Norm("rms_norm", "module"))
SUITE_DTYPES = ("float16", "bfloat16", "float32")


def suite_pairs(table: tuple[Neighbour, ...]) -> list[tuple[Neighbour, Norm]]:
    """(neighbour, norm) pairs of the context suite: the neighbour's own suite norms where it names them (those
    its upstream report is about), else the first applicable suite norm and one more in turn."""
    out = []
    for i, nb in enumerate(table):
        if nb.suite_norms:  # the norms its upstream report is about
            out += [(nb, n) for n in nb.suite_norms]
            continue
        fits = [n for n in SUITE_NORMS if applies(nb, n)]
        picks = fits[:1] + ([fits[1:][i % (len(fits) - 1)]] if len(fits) > 1 else [])
        out += [(nb, n) for n in picks]
    return out


_BY_PROGRAM: dict[str, tuple[Neighbour, Norm]] = {}


def entry_of(case: dict) -> tuple[Neighbour, Norm] | None:
    """The (neighbour, norm) a program case's record runs, by its program text, or None (triage reads it)."""
    source = case.get("program")
    if source is None:
        return None
    if not _BY_PROGRAM:
        for nb in TABLE:
            for norm in catalog_norms():
                if applies(nb, norm):
                    for dtype in SUITE_DTYPES:
                        _BY_PROGRAM.setdefault(program(nb, norm, dtype), (nb, norm))
    return _BY_PROGRAM.get(source)
