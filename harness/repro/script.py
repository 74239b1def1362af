"""Writes the standalone reproduction script of one case on one path.

The script is a function of (spec, path, bug entry or recorded verdict)
only, so two generations give the same bytes. Inputs are re-derived in the
script with NumPy's PCG64 exactly as harness/oracle/inputs.py draws them (a SHA-256 of
the bytes normdiff draws is embedded and checked; a kind without a recipe here
is embedded as its bytes); the model is the module normdiff builds
(harness/oracle/modules.py): a catalog layer_norm/rms_norm style's program
as its forward, torch's own module for the other norms; the FP64
reference is plain NumPy; the tolerance is normdiff's for the case and path
(harness/oracle/compare.py: the bound, or for a compiled path the measured
one) turned into `ATOL + RTOL * |ref|`.
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import textwrap
import types
from string import Template

import ml_dtypes
import numpy as np

from harness import paths
from harness.core.dtypes import np_dtype, unit_roundoff
from harness.spec import CaseSpec
from harness.oracle.compare import (C_ACC, C_OUT, C_ROUND, EAGER_MULTIPLIER, FLOOR, measured_tolerance,
                                    tolerance, witness_units)
from harness.oracle.inputs import channel_axis, make_inputs
from harness.oracle.reference import reference
from harness.oracle.twins import TWIN_PATTERNS
from harness.repro import pieces as T
from harness.repro.check_code import up
from harness.repro.stage_table import stage_section
from harness.repro import program_script as P

_NP = P.NUMPY_TYPES
_TORCH = {"float32": "torch.float32", "float16": "torch.float16", "bfloat16": "torch.bfloat16"}


def _f(v) -> str:
    """A float literal that reads back as the same double."""
    return repr(float(v))


# -- inputs -------------------------------------------------------------------

def draw_input(spec: CaseSpec, p: dict, stream, name: str, rounded: np.ndarray, shape=None) -> str:
    """Code setting NAME64 (float64, flat or shaped) as harness.oracle.inputs draws input `p` from `stream`
    (a number, or (number, name) for an input with a stream of its own), of `shape` (default x's).

    `rounded` is the input as normdiff rounds it: a kind without a recipe here embeds its bytes.
    """
    shape = tuple(shape or spec.shape)
    if shape != tuple(spec.shape):  # the kinds that read the case's shape read this input's
        spec = types.SimpleNamespace(shape=shape, dtype=str(rounded.dtype), pattern=spec.pattern)
    if isinstance(stream, tuple):
        stream = f"{stream[0]}, {stream[1]!r}"
    n = math.prod(shape)
    kind = p["kind"]
    if kind == "normal":
        return f"{name}64 = rng({stream}).normal({_f(p['mean'])}, {_f(p['std'])}, {n})"
    if kind == "alternating":
        return (f"{name}64 = {_f(p['offset'])} + {_f(p['amplitude'])} * "
                f"np.where(np.arange({n}) % 2 == 0, -1.0, 1.0)  # -a, +a, -a, ... plus the offset")
    if kind == "uniform":
        return f"{name}64 = rng({stream}).uniform({_f(p['low'])}, {_f(p['high'])}, {n})"
    if kind == "constant":
        return f"{name}64 = np.full({n}, {_f(p['value'])})"
    if kind == "offset":
        return f"{name}64 = {_f(p['offset'])} + rng({stream}).normal(0.0, {_f(p['std'])}, {n})"
    if kind == "overflow":
        return (f"g = rng({stream})\n"
                f"sign = np.where(g.random({n}) < 0.5, -1.0, 1.0)\n"
                f"{name}64 = sign * {_f(p['magnitude'])} * g.uniform(0.5, 1.0, {n})")
    if kind == "tiny":
        return f"{name}64 = {_f(p['scale'])} * rng({stream}).normal(0.0, 1.0, {n})"
    if kind == "outlier":
        axis = channel_axis(spec)
        channels = spec.shape[axis]
        count = max(1, min(4, channels // 16))
        return (f"g = rng({stream})\n"
                f"{name}64 = g.normal(0.0, {_f(p['std'])}, {n}).reshape({shape})\n"
                f"index = [slice(None)] * {len(spec.shape)}\n"
                f"index[{axis}] = np.sort(g.choice({channels}, size={count}, replace=False))  # outlier channels\n"
                f"{name}64[tuple(index)] *= {_f(p['scale'])}")
    if kind == "subnormal":
        info = ml_dtypes.finfo(np_dtype(spec.dtype))
        smallest = float(info.smallest_subnormal)
        below_normal = round(float(info.smallest_normal) / smallest)
        return (f"g = rng({stream})\n"
                f"steps = g.integers(1, {below_normal}, {n}).astype(np.float64)  # subnormals of {spec.dtype}\n"
                f"sign = np.where(g.random({n}) < 0.5, -1.0, 1.0)\n"
                f"picked = g.random({n}) < {_f(p['fraction'])}\n"
                f"{name}64 = np.where(picked, sign * steps * {_f(smallest)}, g.normal(0.0, 1.0, {n}))")
    # A kind without a recipe here: embed normdiff's rounded bytes (exact in float64).
    data = base64.b64encode(np.ascontiguousarray(rounded).tobytes()).decode()
    lines = textwrap.wrap(data, 76)
    return ("import base64  # input kind %r has no recipe in normdiff repro: its bytes\n" % kind
            + f"{name}64 = np.frombuffer(base64.b64decode(\n" + "".join(f'    "{c}"\n' for c in lines)
            + "), dtype=DTYPE).astype(np.float64)")


def _draw_x(spec: CaseSpec) -> str:
    """Code setting x64 as harness.oracle.inputs.draw_x does."""
    return draw_input(spec, spec.input_dict, 0, "x", make_inputs(spec).x)


def _extra_names(spec: CaseSpec) -> list[str]:
    return sorted(spec.inputs_dict)


def _param_names(spec: CaseSpec) -> list[str]:
    return list(make_inputs(spec).params)


def _draw_params(spec: CaseSpec) -> str:
    """Code setting each parameter, in harness.oracle.inputs.draw_params's order and streams."""
    if spec.program is not None:
        return P.param_code(spec)
    channels = spec.shape[-1] if spec.pattern in ("layer_norm", "rms_norm") else spec.shape[channel_axis(spec)]
    ones = spec.params_dict["kind"] == "ones"
    draws = {
        "weight": ("np.ones({c})", "g.normal(0.0, 1.0, {c})"),
        "bias": ("np.zeros({c})", "g.normal(0.0, 1.0, {c})"),
        "running_mean": ("np.zeros({c})", "g.normal(0.0, 1.0, {c})"),
        "running_var": ("np.ones({c})", "g.uniform(0.5, 2.0, {c})"),
    }
    lines = [] if ones else ["g = rng(1)"]
    for name in _param_names(spec):
        expr = draws[name][0 if ones else 1].format(c=channels)
        lines.append(f"{name} = {expr}.astype(WEIGHT_DTYPE)")
    return "\n".join(lines)


def _digest(spec: CaseSpec, params: list[str] | None = None) -> str:
    """The SHA-256 of normdiff's bytes of x, the extra inputs and the parameters (default: all of them)."""
    inputs = make_inputs(spec)
    h = hashlib.sha256()
    chosen = inputs.params if params is None else {k: inputs.params[k] for k in params}
    for a in (inputs.x, *(inputs.extra[k] for k in _extra_names(spec)), *chosen.values()):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def input_code(spec: CaseSpec) -> str:
    """Code setting `x` and each parameter to normdiff's bytes (checked by a SHA-256)."""
    extra = _extra_names(spec)
    draw_x = _draw_x(spec)
    if extra:
        draw_x += "\nx = x64.reshape(SHAPE).astype(DTYPE)\n" + P.extra_input_code(spec, draw_input)
    return Template(T.INPUTS).substitute(
        shape=repr(tuple(spec.shape)), seed=spec.seed, np_dtype=_NP[spec.dtype], draws=T.DRAWS,
        np_weight_dtype=_NP[spec.weight_dtype], draw_x=draw_x, draw_params=_draw_params(spec),
        digest=_digest(spec), digest_tuple=", ".join(["x", *extra, *_param_names(spec)]) + ",",
        input_tuple=", ".join(["x", *extra]) + ",",
    )


# -- the model ------------------------------------------------------------------

def _nn_module(spec: CaseSpec) -> str:
    """torch's own module of a group_norm, instance_norm or batch_norm case (as harness.oracle.modules builds it)."""
    wdt = _TORCH[spec.weight_dtype]
    affine = spec.affine != "none"
    channels = spec.shape[1] if len(spec.shape) > 1 else spec.shape[0]
    eps = _f(spec.eps)
    if spec.pattern == "group_norm":
        return f"nn.GroupNorm({spec.groups}, {channels}, eps={eps}, affine={affine}, dtype={wdt})"
    dims = len(spec.shape)
    if spec.pattern == "instance_norm":
        return f"nn.InstanceNorm{dims - 2}d({channels}, eps={eps}, affine={affine}, dtype={wdt})"
    cls = {2: "BatchNorm1d", 3: "BatchNorm1d", 4: "BatchNorm2d", 5: "BatchNorm3d"}[dims]
    return f"nn.{cls}({channels}, eps={eps}, affine={affine}, dtype={wdt})"


def model_code(spec: CaseSpec) -> str:
    """Code defining `model`: the eval-mode torch module holding the case's parameters."""
    if spec.program is not None:
        return P.model_code(spec)
    if spec.pattern in TWIN_PATTERNS:
        return P.style_model_code(spec)
    names = _param_names(spec)
    lines = ["# -- the model: torch's own module", f"model = {_nn_module(spec)}"]
    if names:
        lines.append("with torch.no_grad():")
        lines += [f"    model.{n}.copy_(to_torch({n}))" for n in names]
    lines.append("model.eval()")
    return "\n".join(lines) + "\n"


# -- the reference ------------------------------------------------------------------

def reference_code(spec: CaseSpec, terms: bool = False, torch_init: bool = False) -> str:
    """Code defining `ref`: normdiff's FP64 reference in plain NumPy (a program: in float64 torch). With
    `terms` (a catalog norm, for the short script), top-level statements that also define what normdiff's
    bound reads (harness.oracle.reference.Reference): the normalized value `z`, the row's conditioning
    `kappa` = rms(x)/sqrt(var+eps), the effective weight `w` and the bias `b`, each broadcastable to the
    output; `torch_init`: the parameters are torch's own init (weight 1, bias 0), not arrays of the script."""
    if spec.program is not None:
        return P.reference_code(spec)
    shape = spec.shape
    eps = _f(spec.eps)
    lines = ["# -- the FP64 reference: the norm's exact mathematics on the rounded inputs",
             "def reference():", "    X = x.astype(np.float64)"]
    if spec.pattern == "layer_norm":
        lines += ["    mean = X.mean(-1, keepdims=True)",
                  "    var = ((X - mean) ** 2).mean(-1, keepdims=True)",
                  f"    z = (X - mean) / np.sqrt(var + {eps})"]
        kappa = f"np.sqrt((X ** 2).mean(-1, keepdims=True)) / np.sqrt(var + {eps})"
    elif spec.pattern == "rms_norm":
        if terms:
            lines += ["    var = (X ** 2).mean(-1, keepdims=True)", f"    z = X / np.sqrt(var + {eps})"]
        else:
            lines += [f"    z = X / np.sqrt((X ** 2).mean(-1, keepdims=True) + {eps})"]
        kappa = f"np.sqrt(var) / np.sqrt(var + {eps})"
    elif spec.pattern in ("group_norm", "instance_norm"):
        groups = spec.groups if spec.pattern == "group_norm" else shape[1]
        lines += [f"    G = X.reshape({shape[0]}, {groups}, -1)  # one row per (sample, group)",
                  "    mean = G.mean(-1, keepdims=True)",
                  "    var = ((G - mean) ** 2).mean(-1, keepdims=True)",
                  f"    z = ((G - mean) / np.sqrt(var + {eps})).reshape(SHAPE)"]
        kappa = (f"np.broadcast_to(np.sqrt((G ** 2).mean(-1, keepdims=True)) / np.sqrt(var + {eps}), "
                 "G.shape).reshape(SHAPE)")
    else:  # batch_norm in eval mode: the running statistics
        view = tuple(shape[1] if i == 1 else 1 for i in range(len(shape)))
        others = tuple(i for i in range(len(shape)) if i != 1)
        lines += [f"    mean = running_mean.astype(np.float64).reshape({view})",
                  f"    var = running_var.astype(np.float64).reshape({view})",
                  f"    z = (X - mean) / np.sqrt(var + {eps})"]
        kappa = f"np.sqrt((X ** 2).mean({others}, keepdims=True)) / np.sqrt(var + {eps})"
    per_channel = spec.pattern not in ("layer_norm", "rms_norm")
    view = tuple(shape[1] if i == 1 else 1 for i in range(len(shape)))
    shaped = f".reshape({view})" if per_channel else ""
    w = "1.0"
    if spec.affine != "none":
        w = f"weight.astype(np.float64){shaped}"
        w = f"(1.0 + {w})" if spec.style == "gemma" else w
    b = f"bias.astype(np.float64){shaped}" if spec.affine == "weight_bias" else "0.0"
    if terms:
        if torch_init and spec.affine != "none":
            w, b = "1.0", "0.0" if spec.affine == "weight_bias" else b
        body = [line[4:] for line in lines[2:]] + [
            f"kappa = {kappa}  # the row's conditioning: rms(x) / sqrt(var + eps)",
            f"w, b = {w}, {b}" + ("  # torch's init" if torch_init else ""), "ref = z * w + b"]
        return "\n".join(["# -- the FP64 reference: the norm's exact mathematics on the rounded inputs, and its bound's terms",
                          *body]) + "\n"
    out = "z" if w == "1.0" else f"z * {w}"
    if b != "0.0":
        out += f" + {b}"
    lines += [f"    return {out}", "", "", "ref = reference()"]
    return "\n".join(lines) + "\n"


# -- the tolerance ----------------------------------------------------------------

def plain_tolerance(spec: CaseSpec, compiled: bool = False, ref=None) -> tuple[float, float, str]:
    """(rtol, atol, note): ATOL + RTOL*|ref| is at least normdiff's tolerance at every element.

    RTOL carries the terms that scale with the output (C_OUT ulps of the
    rounding dtype and the statistics error times |z|); ATOL the rest, as the
    largest excess of the tolerance over RTOL*|ref| anywhere in the case. A
    compiled path on a catalog norm is held to the measured tolerance
    (compare.measured_tolerance: 2x what correct float32 implementations
    achieve on these rows); eager, programs and batch_norm eval to the bound.
    """
    ref = ref if ref is not None else reference(spec, make_inputs(spec))  # a module case's: its lifted program's
    r = ref.rounding_dtype
    u_r = unit_roundoff(r)
    if ref.bound is not None:  # a program: RTOL from where the tolerance is relative, ATOL the rest
        measured = measured_tolerance(ref, r) if compiled else None
        bound = measured if measured is not None else tolerance(ref, r)
        big = np.abs(ref.out) >= np.median(np.abs(ref.out))
        rtol = up(float(np.max(bound[big] / np.abs(ref.out[big]))) if big.any() and np.all(ref.out[big])
                         else C_OUT * u_r)
        atol = up(float(max(0.0, (bound - rtol * np.abs(ref.out)).max())))
        if measured is not None:
            return rtol, atol, (f"normdiff's tolerance for a compiled path on this program: {C_OUT:g} ulp of the "
                                f"output, plus {EAGER_MULTIPLIER:g}x what its witnesses (correct float32 "
                                "implementations of the program) err on these rows")
        return rtol, atol, (f"normdiff's bound for this program: each of its roundings and its float32 "
                            f"accumulations over {ref.row_len} elements, carried to the output")
    measured = measured_tolerance(ref, r) if compiled else None
    acc = C_ACC * unit_roundoff("float32") * math.sqrt(ref.row_len)
    if measured is not None:
        acc = max(FLOOR * acc, EAGER_MULTIPLIER * float(witness_units(ref).min()))
    u_eff = C_ROUND * unit_roundoff(ref.stat_dtype) + acc
    rtol = up(C_OUT * u_r * (1 + 2 * u_r) + u_eff)
    excess = (tolerance(ref, r) if measured is None else measured) - rtol * np.abs(ref.out)
    atol = up(float(max(0.0, excess.max())))
    if measured is not None:
        note = (f"normdiff's tolerance for a compiled path: {C_OUT:g} ulp of {r} for rounding the output, "
                f"plus {EAGER_MULTIPLIER:g}x the accumulation error correct float32 implementations "
                f"(sequential two-pass, sequential Welford, pairwise two-pass) make on these rows")
    else:
        note = (f"normdiff's bound: {C_OUT:g} ulp of {r} for rounding the output, plus "
                f"statistics in {ref.stat_dtype} accumulated over {ref.row_len} elements")
    return rtol, atol, note


# -- the script -------------------------------------------------------------------------

def dynamic_code(spec: CaseSpec) -> str:
    """The line setting DYNAMIC, what the path's calls pass as their `dynamic` (harness.paths.base.dynamic_of): a
    symbolic case compiles its dims symbolic once, and runs at the size it failed at."""
    if not spec.dynamic:
        return "DYNAMIC = None  # static shapes: the path compiles the case's own sizes\n"
    return (f"# the dims of x compiled as symbolic sizes in [1, max] (torch.export Dim and each path's own form):\n"
            f"# one compile for every size, run here at SHAPE\nDYNAMIC = ({tuple(spec.dynamic)!r}, {spec.dynamic_max})\n")


def path_code(spec: CaseSpec, runner) -> str:
    """The path's part of a script: DYNAMIC (dynamic_code), then its pasted pipeline and `run_path`."""
    return dynamic_code(spec) + "\n\n" + runner.script_code()


def _clean(text: str) -> str:
    """Text safe inside a triple-quoted docstring."""
    return text.replace("\\", "\\\\").replace('"""', "'''")


def _wrap(text: str, indent: str = "") -> str:
    return textwrap.fill(text, width=79, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def _header(spec: CaseSpec, path: str, description: str, library: str | None,
            bug=None, recorded: str | None = None) -> str:
    lib = library or "nothing else"
    if bug is not None:
        title = f"{bug.id}: {bug.title}"
        parts = [bug.link or "(not reported upstream yet)", "", _wrap(bug.note), ""]
        verdict = (f"normdiff verdict while the bug is present: {bug.verdict} "
                   f"(recorded with the pinned versions: {bug.expect})")
    else:
        title = f"normdiff repro: {spec} on {path}"
        parts = []
        verdict = f"Recorded: {recorded}" if recorded else ""
    spec_json = json.dumps(spec.to_dict(), sort_keys=True)
    parts += [
        f"Case: {spec}",
        _wrap(f"normdiff spec (case_id {spec.case_id}): {spec_json}", "  "),
        _wrap(f"Path: {path}: {description}"),
    ]
    if verdict:
        parts.append(_wrap(verdict))
    parts += ["", _wrap(f"Standalone: needs torch, numpy, ml_dtypes and {lib}. Exits 1 while "
                        "the problem is present, 0 once it is fixed. Written by `normdiff repro`.")]
    return Template(T.HEADER).substitute(title=_clean(title), body=_clean("\n".join(parts)))


def _rows_view(spec: CaseSpec) -> str:
    """The expression viewing `a` as the normalization rows harness.oracle.reference scores by."""
    shape = spec.shape
    if spec.program is not None:
        return "np.asarray(a).reshape(1, -1)  # a program: the whole output at once"
    if spec.pattern in ("layer_norm", "rms_norm"):
        return f"np.asarray(a).reshape(-1, {shape[-1]})"
    if spec.pattern in ("group_norm", "instance_norm"):
        groups = spec.groups if spec.pattern == "group_norm" else shape[1]
        return f"np.asarray(a).reshape({shape[0] * groups}, -1)  # one row per (sample, group)"
    return "np.moveaxis(np.asarray(a), 1, 0).reshape(a.shape[1], -1)  # batch_norm: one row per channel"


def report_code(spec: CaseSpec, path: str, runner, ref, libraries: tuple) -> str:
    """The report and check piece: the output's tolerance and check, or each output's (T.REPORT_SEVERAL) for a
    case of several outputs, each held to its own reference and tolerance."""
    tolerances = [plain_tolerance(spec, compiled=path != "eager", ref=r) for r in ref.each]
    fields = dict(rows_view=_rows_view(spec), path=path, is_eager=str(path == "eager"), libraries=repr(libraries),
                  case_repr=repr(str(spec)), description_repr=repr(runner.description), layout=repr(spec.layout))
    if not ref.outputs:
        rtol, atol, note = tolerances[0]
        return Template(T.REPORT).substitute(tolerance_note=note, expected_dtype=f"np.dtype({_NP[ref.out_dtype]})",
                                             rtol=repr(rtol), atol=repr(atol), **fields)
    return Template(T.REPORT_SEVERAL).substitute(
        tolerance_note=f"per output; {tolerances[0][2]}", names=repr(ref.output_names),
        expected_dtype="(" + ", ".join(f"np.dtype({_NP[r.out_dtype]})" for r in ref.each) + ",)",
        rtol=repr(tuple(t[0] for t in tolerances)), atol=repr(tuple(t[1] for t in tolerances)), **fields)


def render(spec: CaseSpec, path: str, *, bug=None, recorded: str | None = None) -> str:
    """The standalone script reproducing `spec` on `path` (KeyError for an unknown path)."""
    runner = paths.get(path)  # KeyError for an unknown path
    description = runner.description
    others = [d for d in runner.packages if d != "torch"]
    library = ", ".join(others) or None
    ref = reference(spec, make_inputs(spec))

    model = model_code(spec)
    code_imports = T.IMPORTS + "from torch import nn\n"
    if "F." in model:
        code_imports += "import torch.nn.functional as F\n"
    code_imports += runner.script_imports
    path_part = path_code(spec, runner)
    libraries = tuple(dict.fromkeys(("torch", *others, "numpy", "ml_dtypes")))
    report = report_code(spec, path, runner, ref, libraries)
    # A path that exposes its intermediates (declared: its script defines `intermediates`) gets the stage table
    # (docs/attribution.md), for a case of one output.
    stages = stage_section(spec) if runner.has_intermediates and not ref.outputs else None
    sections = [
        _header(spec, path, description, library, bug, recorded),
        code_imports, T.CONVERSIONS, input_code(spec), model, reference_code(spec), path_part,
        *([stages] if stages else []), report,
    ]
    return "\n\n\n".join(s.strip("\n") for s in sections) + "\n"
