"""The short script of a bug report (`normdiff repro --report`): what a maintainer pastes and runs.

apache/tvm#20909's script is 60 lines: the model, the input, the library's
calls, the FP64 reference and the check. The full script of `normdiff
repro` (harness.repro.script) also carries normdiff's machinery (every input
kind's recipe, every dtype table, the stage table); this one carries only
what the case uses, built from the same pieces:

* the input: the line harness.repro.script draws it with (a one-line
  construction for alternating, constant and the seeded kinds; the bytes
  where a kind has no recipe), parameters as literals of their kind, and one
  SHA-256 line that checks every byte against normdiff's;
* the model: torch's own module for a layer_norm/rms_norm of the `module`
  style and for the other norms, else the style's or the case's program as
  the forward (harness.repro.script.model_code);
* the path's own calls: its `script_code` (its pipeline pasted by source),
  cut to the lines this case runs (harness.repro.specialize), the pasted
  functions without their docstrings (the full script keeps them);
* normdiff's conversions without the branches the case never takes, and no
  blank lines (sections are marked by their `# --` lines): a report's script
  is read whole, at most 100 lines (tests/repro/test_short_script.py);
* the FP64 reference (harness.repro.script.reference_code, with the terms
  its bound reads; a gradient case of torch's own module: its float64
  autograd) and normdiff's check itself (harness.repro.check_code, as the
  full script's): its rows, its bound, the witnesses' allowance per row, the
  shape and the dtype; a case of several outputs calls one shared check with
  each output's thresholds.

It exits 1 while the bug is present (a failed check, or the path raising),
0 once it is fixed. Its output lines are the report's "Output" section, and
`first_values` reads the path's first values back from them.
"""
from __future__ import annotations

import ast
import inspect
import math
import re

from harness import paths
from harness.core import tensors
from harness.oracle.inputs import COTANGENT, EXTRA_STREAMS, NAMED, extra_type, make_inputs
from harness.oracle.reference import reference
from harness.program.ir import ones_value
from harness.repro import pieces as T
from harness.repro.check_code import check_code, shared_check_code
from harness.repro.specialize import (backward_only, fold_constants, forward_only, hoisted, inline_identities, joined,
                                       norm_only, one_line_ifs, prune, static_only, tight, used_names, without_bfloat16)
from harness.repro import gradient_script as G
from harness.repro import program_script as P
from harness.repro import script as S
from harness.spec import CaseSpec

# Names the script may use, each with the import that defines it (kept only where the script uses it).
_IMPORTS = (("copy", "import copy"), ("hashlib", "import hashlib"), ("types", "import types"), ("zlib", "import zlib"),
            ("ml_dtypes", "import ml_dtypes"), ("np", "import numpy as np"), ("torch", "import torch"),
            ("nn", "from torch import nn"), ("F", "import torch.nn.functional as F"))
FIRST = 4  # how many first values the script prints
RUN = "out = run_path(model, example, INPUTS)"  # the script's one line running the path


def rng_code(seed: int) -> str:
    """normdiff's stream generator (harness.oracle.inputs._rng: PCG64 seeded by [seed, stream] and a named
    stream's CRC-32) in one line; NumPy's default_rng seeds PCG64 by the same SeedSequence
    (tests/repro/test_short_script.py holds the two to the same draws; the SHA-256 line to normdiff's bytes)."""
    return (f"rng = lambda stream, name=None: np.random.default_rng([{seed}, stream] + ([] if name is None else "
            f"[zlib.crc32(name.encode())]))  # normdiff's streams (harness.oracle.inputs._rng), seed {seed}")
_VALUES = re.compile(r"^(?:output \S+: )?(?P<who>[\w.-]+) \((?P<dtype>\w+)\): (?P<values>\[.*\])$")  # the first output's, of several


def _torch_module(spec: CaseSpec) -> str | None:
    """`model = nn.LayerNorm(...)` / nn.RMSNorm for a catalog module-style case (None for other cases)."""
    if spec.program is not None or spec.style != "module" or spec.pattern not in ("layer_norm", "rms_norm"):
        return None
    c, wdt, eps = spec.shape[-1], S._TORCH[spec.weight_dtype], S._f(spec.eps)
    affine = spec.affine != "none"
    if spec.pattern == "layer_norm":
        bias = "" if spec.affine != "weight" else ", bias=False"
        line = f"model = torch.nn.LayerNorm({c}, eps={eps}, elementwise_affine={affine}{bias}, dtype={wdt}).eval()"
    else:  # torch.nn: no `from torch import nn` line where nothing else is an nn.Module
        line = f"model = torch.nn.RMSNorm({c}, eps={eps}, elementwise_affine={affine}, dtype={wdt}).eval()"
    names = S._param_names(spec)
    if spec.params_dict["kind"] == "ones" or not names:  # torch's own init is the `ones` kind: 1, and 0 for bias
        return line + "\n"
    copies = [f"    model.{n}.copy_(to_torch({n}))" for n in names]
    return "\n".join([line, "with torch.no_grad():", *copies]) + "\n"


def _params(spec: CaseSpec) -> str:
    """Code setting each parameter: a literal of its kind, or its draw (checked by the SHA-256 line)."""
    if spec.program is None:
        return S._draw_params(spec)
    params = spec.params_dict
    kind, values = params["kind"], params.get("values") or {}
    lines, drew = [], False
    one = sum(n in ("w", "b", "s") for n, _ in spec.param_shapes) == 1  # one draw from the stream: no `g`
    for name, shape in spec.param_shapes:
        shape = tuple(shape)
        if kind in ("ones", "fill"):
            lines.append(f"{name} = np.full({shape}, {S._f(values.get(name, ones_value(name)))}).astype(WEIGHT_DTYPE)")
            continue
        n = math.prod(shape)
        if name in ("w", "b", "s") and one:
            source = "rng(1)"
        elif name in ("w", "b", "s"):
            if not drew:
                lines.append("g = rng(1)  # w, b and s draw in that order from the parameters' stream")
                drew = True
            source = "g"
        else:
            source = f"rng(1, {name!r})"
        draw = f"uniform(0.5, 2.0, {n})" if "var" in name.lower() else f"normal(0.0, 1.0, {n})"
        lines.append(f"{name} = {source}.{draw}.reshape({shape}).astype(WEIGHT_DTYPE)")
    return "\n".join(lines)


def _draw(spec: CaseSpec, p: dict, stream, name: str, rounded, shape: str, dtype: str, shaped=None) -> str:
    """Code setting `name` as normdiff draws it: one line where harness.repro.script's draw is one line."""
    if p["kind"] == "alternating":  # -a, +a, ... plus the offset, in flat order: a pair repeated
        low, high = p["offset"] - p["amplitude"], p["offset"] + p["amplitude"]
        return f"{name} = np.resize([{S._f(low)}, {S._f(high)}], {shape}).astype({dtype})  # alternating"
    code = S.draw_input(spec, p, stream, name, rounded, shaped)
    if "\n" in code:
        return code + f"\n{name} = {name}64.reshape({shape}).astype({dtype})"
    expr = code.split(" = ", 1)[1].split("  #", 1)[0]
    if not isinstance(ast.parse(expr, mode="eval").body, ast.Call):
        expr = f"({expr})"
    return f"{name} = {expr}.reshape({shape}).astype({dtype})"


def _torch_init(spec: CaseSpec) -> bool:
    """Whether the model is torch's own module with its own init as the parameters (the `ones` kind)."""
    return _torch_module(spec) is not None and spec.params_dict["kind"] == "ones"


def _inputs(spec: CaseSpec) -> str:
    inputs = make_inputs(spec)
    lines = ["# -- the input, exactly normdiff's",
             f"SHAPE, DTYPE, WEIGHT_DTYPE = {tuple(spec.shape)!r}, {S._NP[spec.dtype]}, {S._NP[spec.weight_dtype]}",
             _draw(spec, spec.input_dict, 0, "x", inputs.x, "SHAPE", "DTYPE")]
    for name, p in spec.inputs_dict.items():
        stream = EXTRA_STREAMS[name] if name in EXTRA_STREAMS else (NAMED, name)
        shape, dtype = extra_type(spec, name)
        lines.append(_draw(spec, p, stream, name, inputs.extra[name], repr(tuple(shape)), S._NP[dtype], shape))
    params = [] if _torch_init(spec) else S._param_names(spec)
    if params:
        lines.append(_params(spec))
    cotangents = G.setup(spec).inputs.cotangents if spec.grad else ()
    names = list(G.cotangent_names(spec)) if spec.grad else []
    for k, (name, a) in enumerate(zip(names, cotangents)):  # as harness.repro.gradient_script.cotangent_code
        lines.append(_draw(spec, spec.cotangent_dict, (COTANGENT, str(k)), name, a, repr(tuple(a.shape)),
                           S._NP[str(a.dtype)], a.shape) + f"  # the cotangent of output {k}: its own stream")
    if any("rng(" in line for line in lines):  # a seeded kind: normdiff's streams, pasted by source, checked
        lines[0] += " (the SHA-256 below checks every byte)"
        arrays = ", ".join(["x", *S._extra_names(spec), *params, *names])
        lines.append(f'assert hashlib.sha256(b"".join(a.tobytes() for a in ({arrays},))).hexdigest() == '
                     f'"{S._digest(spec, params, cotangents)}", "the inputs differ from normdiff\'s"')
        lines[2:2] = [rng_code(spec.seed)]
    lines.append(f"INPUTS = ({', '.join(['x', *S._extra_names(spec), *names])},)"
                 + ("  # the Backward's inputs: the norm's, then the cotangents" if names else ""))
    return "\n".join(lines) + "\n"


def _inline_types(inputs: str, rest: str) -> str:
    """`inputs` with SHAPE, DTYPE and WEIGHT_DTYPE written in place where nothing else in the script reads them."""
    head = inputs.split("\n")[1]
    names, values = head.split(" = ", 1)
    names = names.split(", ")
    if any(re.search(rf"\b{n}\b", rest) for n in names):
        return inputs
    for name, value in zip(names, ast.parse(values, mode="eval").body.elts):
        inputs = re.sub(rf"\b{name}\b", ast.unparse(value), inputs.replace(head + "\n", ""))
    return inputs


def _plain(spec: CaseSpec) -> bool:
    """Whether torch.from_numpy and .numpy() carry the case's tensors as they are (no bfloat16, no layout)."""
    dtypes = {spec.dtype, spec.weight_dtype, *(extra_type(spec, n)[1] for n in spec.inputs_dict)}
    return "bfloat16" not in dtypes and spec.layout == "contiguous"


# to_numpy where no tensor is bfloat16: harness.core.tensors.to_numpy without that branch; for a case of one output
# without `single` (a path returning more is a shape mismatch, and fails here too). Tests hold them to the bits.
_TO_NUMPY = ("def to_numpy(t) -> np.ndarray:  # no bfloat16 here: torch's own .numpy(); several outputs: a tuple\n"
             "    if isinstance(t, (list, tuple)): return to_numpy(t[0]) if len(t) == 1 else tuple(map(to_numpy, t))\n"
             "    return t.detach().cpu().contiguous().numpy().copy()\n")
_TO_NUMPY_ONE = ("def to_numpy(t) -> np.ndarray:  # one output (alone in a list or not), its bits\n"
                 "    return to_numpy(t[0]) if isinstance(t, (list, tuple)) and len(t) == 1 else "
                 "t.detach().cpu().contiguous().numpy().copy()\n")
_TO_NUMPY_ONE_BFLOAT16 = ("def to_numpy(t) -> np.ndarray:  # one output (alone in a list or not), its bits: bfloat16 "
                          "as its 16-bit words\n"
                          "    if isinstance(t, (list, tuple)) and len(t) == 1: return to_numpy(t[0])\n"
                          "    t = t.detach().cpu().contiguous()\n"
                          "    return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy() if t.dtype == "
                          "torch.bfloat16 else t.numpy().copy()\n")
_TO_TORCH = ('def to_torch(x: np.ndarray, layout: str = "contiguous"):  # no bfloat16 and no layout here\n'
             "    return torch.from_numpy(np.ascontiguousarray(x).copy())\n")
_TO_TORCH_BFLOAT16 = ('def to_torch(x: np.ndarray, layout: str = "contiguous"):  # bfloat16 as its 16-bit words; no layout\n'
                      "    x = np.ascontiguousarray(x)\n"
                      "    return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16) if x.dtype == "
                      "ml_dtypes.bfloat16 else torch.from_numpy(x.copy())\n")


def _no_bfloat16(spec: CaseSpec, ref) -> bool:
    """Whether no tensor of the case is bfloat16: its inputs, its outputs, none its program writes."""
    dtypes = {spec.dtype, spec.weight_dtype, *(extra_type(spec, n)[1] for n in spec.inputs_dict),
              *(r.out_dtype for r in ref.each)}
    return "bfloat16" not in dtypes and "bfloat16" not in (spec.program or "")


def _conversions(spec: CaseSpec, ref) -> str:
    """normdiff's conversions (pasted by source), without the branches the case never takes: to_torch of a
    plain case comes to torch.from_numpy, a contiguous one's has no layout; to_numpy without bfloat16 to
    torch's own .numpy()."""
    text, no_bfloat16 = T.CONVERSIONS, _no_bfloat16(spec, ref)
    if no_bfloat16 or not ref.outputs:
        short = _TO_NUMPY if ref.outputs else _TO_NUMPY_ONE if no_bfloat16 else _TO_NUMPY_ONE_BFLOAT16
        text = text.replace(inspect.getsource(tensors.to_numpy), short)
    if spec.layout != "contiguous":
        return text
    return text.replace(inspect.getsource(tensors.to_torch), _TO_TORCH if _plain(spec) else _TO_TORCH_BFLOAT16)


def _reference(spec: CaseSpec) -> str:
    """The FP64 reference: a catalog norm's with the terms of its bound; a program's as the model's own class
    where the program rounds to no dtype of its own (its float64 copy would be the same text), else as a
    subclass of it whose forward is that copy."""
    if spec.program is None:
        return S.reference_code(spec, torch_init=_torch_init(spec))
    if P.rounds(spec.program):
        return P.reference_subclass_code(spec)
    params = "{" + ", ".join(f"{n!r}: {n}.astype(np.float64)" for n, _ in spec.param_shapes) + "}"
    args = ", ".join(f"to_torch({a}.astype(np.float64))" for a in P.program_args(spec).split(", "))
    return ("# -- the FP64 reference: the same program (it rounds to no dtype of its own) on float64 copies\n"
            f"ref = to_numpy(Program({params}, {float(spec.eps)!r})({args}))\n")


def _autograd_reference(spec: CaseSpec) -> str:
    """A gradient case of torch's own module (nn.LayerNorm, nn.RMSNorm: no rounding of its own): its FP64
    reference as torch's float64 autograd of the same module, which normdiff checks its lifted backward against
    (harness.modules.lift_backward.float64_gradients; the full script pastes the lifted backward itself)."""
    n_inputs = 1 + len(S._extra_names(spec))
    return ("# -- the FP64 reference: torch's float64 autograd of the same module (normdiff's lifted backward, which the "
            "full script pastes, is checked against it)\n"
            f"ref = to_numpy(Backward(copy.deepcopy(model.forward_module).double(), {n_inputs})"
            "(*(to_torch(a.astype(np.float64)) for a in INPUTS)))\n")


def _gradients_code() -> str:
    """A gradient case of torch's own module (one input x, one output) on a path that differentiates the norm
    itself (specialize.norm_only: TVM's vjp_target of model.forward_module): normdiff's Backward would be pasted
    only for eager's gradients and the FP64 reference, which are what it computes, torch.autograd.grad of the
    output with the cotangent over x then the floating parameters in the module's order, zero where autograd
    says None (harness.oracle.backward.Backward; tests/repro/test_short_script.py holds the two to the bits)."""
    return ("# -- eager's gradients and the FP64 reference (torch's float64 autograd of the same module), as normdiff's "
            "Backward takes them: autograd.grad of the output with its cotangent, over x then the floating parameters\n"
            "def gradients(module, x, dy):\n"
            "    leaves = [torch.from_numpy(x).requires_grad_(True)] + [p.requires_grad_(True) for p in module.parameters() "
            "if p.is_floating_point()]  # None below: a zero gradient\n"
            "    return tuple((torch.zeros_like(t) if g is None else g).detach().numpy() for g, t in "
            "zip(torch.autograd.grad(module(leaves[0]), leaves, torch.from_numpy(dy), allow_unused=True), leaves))\n"
            "ref = gradients(copy.deepcopy(model).double(), *(a.astype(np.float64) for a in INPUTS))\n")


def _check(spec: CaseSpec, path: str, ref, gradients: bool = False) -> str:
    """Code running eager and the path and exiting 1 where normdiff's check fails (harness.repro.check_code);
    `gradients`: the model is torch's module, eager's gradients `gradients(model, *INPUTS)` (_gradients_code)."""
    if ref.outputs:
        return _check_each(spec, path, ref, gradients)
    expected = f"np.dtype({S._NP[ref.out_dtype]})" if path == "eager" else "eager.dtype"
    first = f"[float(v) for v in {{}}.reshape(-1)[:{FIRST}]]"
    eager = "model(*example).detach().numpy()" if _plain(spec) else "to_numpy(model(*example))"
    example = ("torch.from_numpy(a)" if _plain(spec) else f"to_torch(a, {spec.layout!r})") + " for a in INPUTS"
    lines = [check_code(spec, ref, path, expected, width=None), "",
             f"example = tuple({example})",
             f"eager = {eager}",
             f'print(f"expected (FP64 reference): {{{first.format("ref")}}}\\neager ({{eager.dtype}}): {{{first.format("eager")}}}")',
             f"{RUN}",
             f'print(f"{path} ({{out.dtype}}):", {first.format("out")})',
             "raise SystemExit(check(out, eager))"]
    return "\n".join(lines) + "\n"


def _check_each(spec: CaseSpec, path: str, ref, gradients: bool = False) -> str:
    """_check for a case of several outputs: each output held to its own thresholds and reference
    (harness.repro.check_code, as the full script's) by one shared check where their checks differ only in
    their numbers (check_code.shared_check_code), else by its own `check_K`, in turn."""
    expected = ["eager.dtype" if path != "eager" and not r.gradient else f"np.dtype({S._NP[r.out_dtype]})"
                for r in ref.each]
    names = list(ref.output_names)
    checks = [check_code(spec, r, path, e, k, name, width=None)
              for k, (r, name, e) in enumerate(zip(ref.each, names, expected))]
    shared = shared_check_code(checks, names, expected)
    first = f"[float(v) for v in {{}}.reshape(-1)[:{FIRST}]]"
    example = f"tuple({'torch.from_numpy(a)' if _plain(spec) else f'to_torch(a, {spec.layout!r})'} for a in INPUTS)"
    if gradients:  # eager's by _gradients_code; of normdiff's Backward, run_path reads only the norm and its count of inputs
        run = RUN.replace("run_path(model, example", f"run_path(types.SimpleNamespace(forward_module=model, n_inputs=1), {example}")
        lines = [shared or "\n".join(checks), "eagers = gradients(model, *INPUTS)",
                 run + "  # of normdiff's Backward, run_path reads only the norm and its count of inputs"]
    else:
        lines = [shared or "\n".join(checks), f"example = {example}", "eagers = to_numpy(model(*example))", RUN]
    lines.append("outs, failing = out if isinstance(out, tuple) else (out,), []")
    if shared is None:
        lines.append(f"CHECKS = ({', '.join(f'check_{k}' for k in range(len(checks)))},)")
    each = f"zip({tuple(names)!r}, ref, eagers, outs)"
    lines += [f"for name, r, eager, out in {each}:" if shared else f"for k, (name, r, eager, out) in enumerate({each}):",
              f'    print(f"output {{name}}: expected (FP64 reference): {{{first.format("r")}}}\\noutput {{name}}: eager '
              f'({{eager.dtype}}): {{{first.format("eager")}}}\\noutput {{name}}: {path} ({{out.dtype}}): {{{first.format("out")}}}")',
              "    failing.append(" + ("check(out, eager, r, name, **THRESHOLDS[name]))" if shared else
                                     "CHECKS[k](out, eager))"),
              f"raise SystemExit(1 if len(outs) != {len(names)} or any(failing) else 0)"]
    return "\n".join(lines) + "\n"


def _compact(code: str, imports: str = "") -> str:
    """`code` without its functions' docstrings, without the imports inside them that the script makes at its
    top, and without blank lines inside them (the full script and the source keep all three)."""
    tree = ast.parse(code)
    lines = code.split("\n")
    top = {ast.unparse(n) for n in [*tree.body, *ast.parse(imports).body] if isinstance(n, (ast.Import, ast.ImportFrom))}
    top |= {line for _, line in _IMPORTS}
    drop: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or not node.body:
            continue
        first = node.body[0]
        if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str) and len(node.body) > 1):
            drop.update(range(first.lineno, first.end_lineno + 1))
        drop.update(n.lineno for n in node.body if isinstance(n, (ast.Import, ast.ImportFrom)) and ast.unparse(n) in top)
        drop.update(i for i in range(node.lineno, node.end_lineno + 1) if not lines[i - 1].strip())
    return "\n".join(line for i, line in enumerate(lines, 1) if i not in drop)


def _imports(body: str, library: str, more: list[str]) -> str:
    """The imports the body uses, the path's and `more` (its functions' own, hoisted), its plain `import`s on one
    line (a short script is counted in lines), each `from` import on its own."""
    used = used_names(ast.parse(body))
    lines = [line for name, line in _IMPORTS if name in used] + [line for line in library.split("\n") if line.strip()]
    lines = list(dict.fromkeys(lines + more))
    plain = [line.removeprefix("import ") for line in lines if line.startswith("import ")]
    plain = [p for p in plain if f"{p} as " not in ", ".join(plain) or p.split(".")[0] in used]  # `a.b as c` imports a.b
    return "\n".join(["import " + ", ".join(plain), *(line for line in lines if not line.startswith("import "))]) + "\n"


def render_short(spec: CaseSpec, path: str, title: str) -> str:
    """The short script reproducing `spec` on `path` (KeyError for an unknown path)."""
    runner = paths.get(path)
    ref = G.setup(spec).ref if spec.grad else reference(spec, make_inputs(spec))
    model = _torch_module(spec) or S.model_code(spec)
    if not model.startswith("#"):  # torch's own module: the comment beside it
        first, _, rest = model.partition("\n")
        model = f"{first}  # the model: torch's own module\n{rest}"
    # a static case's calls pass None where a symbolic one's pass DYNAMIC (no line of its own here)
    path_code = (f"DYNAMIC = ({tuple(spec.dynamic)!r}, {spec.dynamic_max})  # x's dims {tuple(spec.dynamic)} compiled "
                 f"symbolic in [1, {spec.dynamic_max}] (one compile for every size), run at its shape\n\n"
                 + runner.script_code()) if spec.dynamic else runner.script_code().replace("DYNAMIC", "None")
    reference_code, check = _reference(spec), _check(spec, path, ref)
    inputs = _inputs(spec)
    if spec.grad:  # the Backward, the cotangents, the lifted backward's reference (harness.repro.gradient_script)
        path_code = backward_only(path_code)
        alone = norm_only(path_code)  # the path differentiates the norm itself: no function is given the Backward
        path_code = forward_only(path_code) if alone else path_code
        if alone and _torch_module(spec) is not None and ref.outputs and not S._extra_names(spec):
            reference_code, check = _gradients_code(), _check(spec, path, ref, gradients=True)
        else:
            model += "\n" + S.backward_code(spec)
            reference_code = G.reference_code(spec) if _torch_module(spec) is None else _autograd_reference(spec)
    else:
        path_code = forward_only(path_code)
    path_code = path_code if spec.dynamic else static_only(path_code)
    path_code = prune(without_bfloat16(path_code) if _no_bfloat16(spec, ref) else path_code, ("run_path",))
    path_code = inline_identities(fold_constants(path_code))  # what run_path alone calls: its literals settle branches
    if _plain(spec):  # to_torch comes to torch.from_numpy here (the path's own calls keep theirs)
        model, reference_code = (re.sub(r"\bto_torch\(", "torch.from_numpy(", c) for c in (model, reference_code))
    inputs = _inline_types(inputs, "\n".join((model, reference_code, path_code, check)))
    body = "\n\n".join(part.strip("\n") for part in (
        _conversions(spec, ref), inputs, model, reference_code,
        "# -- the path's own calls (normdiff's harness/paths/, pasted)\n" + path_code, check))
    body = tight(one_line_ifs(joined(prune(_compact(body if spec.dynamic else static_only(body), runner.script_imports)))))
    head = (f'#!/usr/bin/env python3\n"""{S._clean(title)}: exits 1 while the bug is present, 0 once it is fixed '
            '(written by normdiff repro --report)."""\n')
    body, more = hoisted(body)
    return head + _imports(body, runner.script_imports, more).rstrip("\n") + "\n" + body


def first_values(output: str, who: str) -> tuple[str, str] | None:
    """(dtype, first values) the script printed for `who` (a path name, or "eager"), or None."""
    for line in output.splitlines():
        m = _VALUES.match(line.strip())
        if m and m["who"] == who:
            return m["dtype"], m["values"]
    return None
