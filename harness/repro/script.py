"""Writes the standalone reproduction script of one case on one path.

The script is a function of (spec, path, bug entry or recorded verdict)
only, so two generations give the same bytes. Inputs are re-derived in the
script with NumPy's PCG64 exactly as harness/oracle/inputs.py draws them (a SHA-256 of
the bytes normdiff draws is embedded and checked; a kind without a recipe here
is embedded as its bytes); the model is the module normdiff builds
(harness/oracle/modules.py): a catalog layer_norm/rms_norm style's program
as its forward, torch's own module for the other norms; the FP64
reference is plain NumPy; the check is normdiff's own rule for the case and
path (harness.repro.check_code, the one check every script pastes).
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import textwrap
import types
from string import Template

import ml_dtypes
import numpy as np

from harness import paths
from harness.paths.base import pasted
from harness.core.dtypes import np_dtype
from harness.spec import CaseSpec
from harness.spec.keys import CAPTURED
from harness.oracle.inputs import channel_axis, make_inputs
from harness.oracle.reference import reference
from harness.oracle.twins import TWIN_PATTERNS
from harness.repro import pieces as T
from harness.repro.check_code import check_code
from harness.repro.stage_table import stage_section
from harness.repro import gradient_script as G
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
    if p["kind"] == CAPTURED:
        return captured_input(name, p["sha256"])
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


def captured_input(name: str, hexd: str) -> str:
    """Code setting NAME64 from a captured tensor's bytes (`normdiff model`): the file beside the script
    (captured/HEX.bin, where `repro -o` copies it), else where normdiff stored it."""
    from harness.core.captured import SUFFIX, find

    try:
        stored = os.path.abspath(find(hexd))
    except LookupError:
        stored = ""
    return (f"_captured = [os.path.join(os.path.dirname(os.path.realpath(__file__)) if '__file__' in globals() "
            f"else os.getcwd(), 'captured', '{hexd}{SUFFIX}'), {stored!r}]\n"
            "_captured = next((c for c in _captured if c and os.path.exists(c)), _captured[0])\n"
            "with open(_captured, 'rb') as _fh:  # the input the model gave this norm, captured bit for bit\n"
            f"    {name}64 = np.frombuffer(_fh.read(), dtype=DTYPE).astype(np.float64)\n"
            f"assert hashlib.sha256(np.asarray({name}64, dtype=DTYPE).tobytes()).hexdigest() == '{hexd}'")


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
    names = _param_names(spec)
    lines = [] if ones or len(names) == 1 else ["g = rng(1)"]  # the parameters draw in order from one stream
    for name in names:
        expr = draws[name][0 if ones else 1].format(c=channels)
        lines.append(f"{name} = {expr if len(names) > 1 else expr.replace('g.', 'rng(1).')}.astype(WEIGHT_DTYPE)")
    return "\n".join(lines)


def _digest(spec: CaseSpec, params: list[str] | None = None, more: tuple = ()) -> str:
    """The SHA-256 of normdiff's bytes of x, the extra inputs and the parameters (default: all of them), then
    the arrays `more` (a gradient case's cotangents)."""
    inputs = make_inputs(spec)
    h = hashlib.sha256()
    chosen = inputs.params if params is None else {k: inputs.params[k] for k in params}
    for a in (inputs.x, *(inputs.extra[k] for k in _extra_names(spec)), *chosen.values(), *more):
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
    lines = ["# -- the model: torch's own module", f"model = {_nn_module(spec)}.eval()"]
    if len(names) > 2:  # each parameter and buffer its array's bits, in a loop
        pairs = ", ".join(f"{n}={n}" for n in names)
        lines += ["with torch.no_grad():", f"    for name, a in dict({pairs}).items():",
                  "        getattr(model, name).copy_(to_torch(a))"]
    elif names:
        lines.append("with torch.no_grad():")
        lines += [f"    model.{n}.copy_(to_torch({n}))" for n in names]
    return "\n".join(lines) + "\n"


def backward_code(spec: CaseSpec) -> str:
    """A gradient case's model: the norm's module wrapped in its Backward (harness/oracle/backward.py, pasted by
    its source with torch's joint graph, which a path's export_program takes for it), called on the inputs then
    the cotangents, as every path is (docs/gradients.md)."""
    from harness.oracle import backward

    n_inputs = 1 + len(_extra_names(spec))
    return ("# -- the backward: what every path compiles for a gradient case (normdiff's Backward and joint_graph)\n"
            + pasted((backward.floating_parameters, backward.Backward, backward.joint_graph))
            + f"\n\n\nmodel = Backward(model, {n_inputs})  # forward(*inputs, *cotangents) -> the gradients\n")


# -- the reference ------------------------------------------------------------------

def reference_code(spec: CaseSpec, torch_init: bool = False) -> str:
    """Code defining `ref`: normdiff's FP64 reference in plain NumPy (a program: in float64 torch). A catalog
    norm's, as top-level statements that also define what normdiff's bound reads (the check,
    harness.repro.check_code; harness.oracle.reference.Reference): the normalized value `z`, the row's
    conditioning `kappa` = rms(x)/sqrt(var+eps), the effective weight `w` and the bias `b`, each broadcastable
    to the output; `torch_init`: the parameters are torch's own init (weight 1, bias 0), not arrays of the
    script."""
    if spec.program is not None:
        return P.reference_code(spec)
    shape = spec.shape
    eps = _f(spec.eps)
    lines = ["X = x.astype(np.float64)"]
    if spec.pattern == "layer_norm":
        lines += ["mean = X.mean(-1, keepdims=True)", "var = ((X - mean) ** 2).mean(-1, keepdims=True)",
                  f"z = (X - mean) / np.sqrt(var + {eps})"]
        kappa = f"np.sqrt((X ** 2).mean(-1, keepdims=True)) / np.sqrt(var + {eps})"
    elif spec.pattern == "rms_norm":
        lines += ["var = (X ** 2).mean(-1, keepdims=True)", f"z = X / np.sqrt(var + {eps})"]
        kappa = f"np.sqrt(var) / np.sqrt(var + {eps})"
    elif spec.pattern in ("group_norm", "instance_norm"):
        groups = spec.groups if spec.pattern == "group_norm" else shape[1]
        lines += [f"G = X.reshape({shape[0]}, {groups}, -1)  # one row per (sample, group)",
                  "mean = G.mean(-1, keepdims=True)", "var = ((G - mean) ** 2).mean(-1, keepdims=True)",
                  f"z = ((G - mean) / np.sqrt(var + {eps})).reshape(SHAPE)"]
        kappa = (f"np.broadcast_to(np.sqrt((G ** 2).mean(-1, keepdims=True)) / np.sqrt(var + {eps}), "
                 "G.shape).reshape(SHAPE)")
    else:  # batch_norm in eval mode: the running statistics
        view = tuple(shape[1] if i == 1 else 1 for i in range(len(shape)))
        others = tuple(i for i in range(len(shape)) if i != 1)
        lines += [f"mean = running_mean.astype(np.float64).reshape({view})",
                  f"var = running_var.astype(np.float64).reshape({view})", f"z = (X - mean) / np.sqrt(var + {eps})"]
        kappa = f"np.sqrt((X ** 2).mean({others}, keepdims=True)) / np.sqrt(var + {eps})"
    per_channel = spec.pattern not in ("layer_norm", "rms_norm")
    view = tuple(shape[1] if i == 1 else 1 for i in range(len(shape)))
    shaped = f".reshape({view})" if per_channel else ""
    w = "1.0"
    if spec.affine != "none":
        w = f"weight.astype(np.float64){shaped}"
        w = f"(1.0 + {w})" if spec.style == "gemma" else w
    b = f"bias.astype(np.float64){shaped}" if spec.affine == "weight_bias" else "0.0"
    if torch_init and spec.affine != "none":
        w, b = "1.0", "0.0" if spec.affine == "weight_bias" else b
    lines += [f"kappa = {kappa}  # the row's conditioning: rms(x) / sqrt(var + eps)",
              f"w, b = {w}, {b}" + ("  # torch's init" if torch_init else ""), "ref = z * w + b"]
    return "\n".join(["# -- the FP64 reference: the norm's exact mathematics on the rounded inputs, and its bound's terms",
                      *lines]) + "\n"


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


def check_section(spec: CaseSpec, path: str, ref) -> tuple[str, dict]:
    """(normdiff's check for the case, the fields of T.MAIN or T.MAIN_SEVERAL): `check(out, eager)`, or for a
    case of several outputs one `check_K` per output, each with its own reference and thresholds
    (harness.repro.check_code: the one check every script pastes)."""
    eager = path == "eager" or ref.gradient or any(r.gradient for r in ref.each)  # a gradient: its own dtype
    if not ref.outputs:
        return check_code(spec, ref, path, "EXPECTED_DTYPE" if eager else "eager.dtype"), {}
    checks = [check_code(spec, r, path, f"EXPECTED_DTYPE[{k}]" if eager else "eager.dtype", k, name)
              for k, (r, name) in enumerate(zip(ref.each, ref.output_names))]
    names = "(" + ", ".join(f"check_{k}" for k in range(len(checks))) + ",)"
    return "\n\n".join(checks), dict(names=repr(ref.output_names), checks=names)


def report_code(spec: CaseSpec, path: str, runner, ref, libraries: tuple) -> str:
    """The report and check piece: normdiff's check (check_section) and the main that prints what a maintainer
    asks for first and exits 1 where the check fails (or the path raises)."""
    check, several = check_section(spec, path, ref)
    expected = ("(" + ", ".join(f"np.dtype({_NP[r.out_dtype]})" for r in ref.each) + ",)" if several
                else f"np.dtype({_NP[ref.out_dtype]})")
    head = Template(T.REPORT).substitute(path=path, is_eager=str(path == "eager"), expected_dtype=expected,
                                         libraries=repr(libraries), check=check.strip("\n"))
    main = Template(T.MAIN_SEVERAL if several else T.MAIN).substitute(
        case_repr=repr(str(spec)), description_repr=repr(runner.description), layout=repr(spec.layout), **several)
    return head + "\n\n" + main


def render(spec: CaseSpec, path: str, *, bug=None, recorded: str | None = None) -> str:
    """The standalone script reproducing `spec` on `path` (KeyError for an unknown path)."""
    runner = paths.get(path)  # KeyError for an unknown path
    description = runner.description
    others = [d for d in runner.packages if d != "torch"]
    library = ", ".join(others) or None
    ref = G.setup(spec).ref if spec.grad else reference(spec, make_inputs(spec))

    model = model_code(spec) + ("\n\n" + backward_code(spec) if spec.grad else "")
    code_imports = T.IMPORTS + "from torch import nn\n"
    if "F." in model:
        code_imports += "import torch.nn.functional as F\n"
    code_imports += runner.script_imports
    path_part = path_code(spec, runner)
    libraries = tuple(dict.fromkeys(("torch", *others, "numpy", "ml_dtypes")))
    report = report_code(spec, path, runner, ref, libraries)
    # A path that exposes its intermediates (declared: its script defines `intermediates`) gets the stage table
    # (docs/attribution.md), for a case of one output or of several.
    stages = stage_section(spec) if runner.has_intermediates else None
    inputs = input_code(spec) + ("\n" + G.cotangent_code(spec, draw_input) if spec.grad else "")
    sections = [
        _header(spec, path, description, library, bug, recorded),
        code_imports, T.CONVERSIONS, inputs, model, G.reference_code(spec) if spec.grad else reference_code(spec),
        path_part,
        *([stages] if stages else []), report,
    ]
    return "\n\n\n".join(s.strip("\n") for s in sections) + "\n"
