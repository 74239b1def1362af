"""The parts of a standalone repro script that are a program's own (docs/contracts.md §7).

A program case's script writes the program, as written, as the forward of a
plain `nn.Module` holding w/b/s (a catalog layer_norm/rms_norm case: its
style's program, holding weight/bias); draws every input (x and the extra inputs,
each from its own PCG64 stream, as harness.oracle.inputs does); and computes
the FP64 reference by running the same program on float64 copies, its dtype
constants and narrowing casts mapped to float64 (so no intermediate rounds:
the program's exact mathematics, as normdiff's interpreter evaluates it).
The mapping is an `ast` rewrite of the checked program text, which the script
then carries as source: nothing here executes the program.
"""
from __future__ import annotations

import ast
import textwrap

from harness.oracle.inputs import EXTRA_STREAMS, NAMED, extra_type, make_inputs

NUMPY_TYPES = {"float32": "np.float32", "float16": "np.float16", "bfloat16": "ml_dtypes.bfloat16"}
from harness.oracle.twins import PROGRAM_NAMES, style_case
from harness.program.styles import STYLE_INPUTS, STYLE_MODELS
from harness.spec import CaseSpec

_FLOAT_DTYPES = {"float16", "bfloat16", "float32"}
_NARROWING = {"half", "bfloat16", "float"}


class _ToFloat64(ast.NodeTransformer):
    """torch.float16/bfloat16/float32 -> torch.float64; .half()/.bfloat16()/.float() -> .double()."""

    def visit_Attribute(self, node: ast.Attribute):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "torch" and node.attr in _FLOAT_DTYPES:
            return ast.copy_location(ast.Attribute(node.value, "float64", node.ctx), node)
        return node

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in _NARROWING and not node.args and not node.keywords:
            node.func = ast.copy_location(ast.Attribute(f.value, "double", f.ctx), f)
        return node


def _body(source: str) -> ast.FunctionDef:
    """The program as the body of a function (parsed, never run)."""
    tree = ast.parse("def forward():\n" + textwrap.indent(source, "    "))
    return tree.body[0]


def float64_source(source: str) -> str:
    """The program with every dtype it rounds to mapped to float64."""
    fn = _ToFloat64().visit(_body(source))
    return "\n".join(ast.unparse(stmt) for stmt in fn.body)


def rounds(source: str) -> bool:
    """Whether the program writes a rounding of its own (a dtype or a narrowing cast): its float64 copy differs."""
    return float64_source(source) != "\n".join(ast.unparse(stmt) for stmt in _body(source).body)


def program_args(spec: CaseSpec) -> str:
    """The program's arguments, in the model's order: x, then the extra inputs by name."""
    return ", ".join(["x", *sorted(spec.inputs_dict)])


def extra_input_code(spec: CaseSpec, draw_input) -> str:
    """Code drawing each extra input (its own stream, shape and dtype) and rounding it."""
    inputs = make_inputs(spec)
    lines = []
    for name, p in spec.inputs_dict.items():
        stream = EXTRA_STREAMS[name] if name in EXTRA_STREAMS else (NAMED, name)
        shape, dtype = extra_type(spec, name)
        lines.append(draw_input(spec, p, stream, name, inputs.extra[name], shape))
        lines.append(f"{name} = {name}64.reshape({tuple(shape)}).astype({NUMPY_TYPES[dtype]})")
    return "\n".join(lines)


def param_code(spec: CaseSpec) -> str:
    """Code setting each parameter with harness.oracle.inputs.draw_named_params (pasted by its source)."""
    params = spec.params_dict
    shapes = [(name, tuple(shape)) for name, shape in spec.param_shapes]
    values = params.get("values")
    lines = [f"PARAMS = draw_named_params({params['kind']!r}, SEED, {shapes!r}, {values!r})"]
    lines += [f"{name} = PARAMS[{name!r}].astype(WEIGHT_DTYPE)" for name, _ in shapes]
    return "\n".join(lines)


def _module(name: str, doc: str, params: list[tuple[str, str]], args: str, source: str) -> list[str]:
    """A module class whose forward is `source`: `params` are (attribute, the program's name for it)."""
    lines = [f"class {name}(nn.Module):", f'    """{doc}"""', "",
             "    def __init__(self, params, eps):", "        super().__init__()"]
    # a torch-allocated copy, as normdiff's modules hold: TVM's importer takes parameters by DLPack,
    # which refuses NumPy's less aligned buffers (and its NumPy fallback has no bfloat16)
    lines += [f"        self.{a} = nn.Parameter(to_torch(params[{a!r}]).clone(), requires_grad=False)"
              for a, _ in params]
    return [*lines, "        self.eps = eps", "", *_forward(params, args, source)]


def _forward(params: list[tuple[str, str]], args: str, source: str) -> list[str]:
    """The forward method running `source` on the module's parameters (under the program's names)."""
    first = args.split(", ")[0]
    lines = [f"    def forward(self, {args}):"]
    reads = ", ".join([f"self.{a}" for a, _ in params] + ["self.eps"])
    names = ", ".join([n for _, n in params] + ["eps"])
    lines.append(f"        {names} = {reads}")
    if first != "x":
        lines.append(f"        x = {first}  # the program's name for the input")
    return lines + [f"        {line}" for line in source.splitlines()]


def _program_params(spec: CaseSpec) -> list[tuple[str, str]]:
    return [(n, n) for n, _ in spec.param_shapes]


def model_code(spec: CaseSpec) -> str:
    """Code defining `model`: the program, as written, as the forward of an eval-mode module."""
    params = "{" + ", ".join(f"{n!r}: {n}" for n, _ in spec.param_shapes) + "}"
    lines = ["# -- the model: the case's program, as written, as the module's forward"]
    lines += _module("Program", "The norm program of the case, line by line.", _program_params(spec), program_args(spec),
                     spec.program)
    lines += ["", "", f"model = Program({params}, {float(spec.eps)!r}).eval()"]
    return "\n".join(lines) + "\n"


def style_model_code(spec: CaseSpec) -> str:
    """Code defining `model` for a catalog layer_norm/rms_norm case: its style's program as the forward.

    The very text normdiff's module runs (harness.oracle.modules.StyleModule),
    with the parameters and the input under the names the model gives them.
    """
    source, _ = style_case(spec)
    names = list(make_inputs(spec).params)
    params = [(n, PROGRAM_NAMES[n]) for n in names]
    arg = STYLE_INPUTS.get((spec.pattern, spec.style), "x")
    lines = [f"# -- the model: the {spec.style} style ({STYLE_MODELS[spec.style]}), normdiff's program as its forward"]
    lines += _module("Norm", f"{spec.pattern}, {spec.style} style: {STYLE_MODELS[spec.style]}, line by line.",
                     params, arg, source)
    given = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
    lines += ["", "", f"model = Norm({given}, {float(spec.eps)!r}).eval()"]
    return "\n".join(lines) + "\n"


def reference_subclass_code(spec: CaseSpec) -> str:
    """Code defining `ref` beside model_code's `Program` (the short script): a subclass whose forward is the
    program with every rounding it writes mapped to float64, run on float64 copies."""
    params = "{" + ", ".join(f"{n!r}: {n}.astype(np.float64)" for n, _ in spec.param_shapes) + "}"
    args = ", ".join(f"to_torch({a}.astype(np.float64))" for a in program_args(spec).split(", "))
    lines = ["# -- the FP64 reference: the program on float64 copies of the inputs, each dtype it rounds to float64",
             "class Program64(Program):"]
    lines += _forward(_program_params(spec), program_args(spec), float64_source(spec.program))
    lines += ["", "", f"ref = to_numpy(Program64({params}, {float(spec.eps)!r})({args}))"]
    return "\n".join(lines) + "\n"


def reference_code(spec: CaseSpec) -> str:
    """Code defining `ref`: the program on float64 copies, every rounding it writes mapped to float64."""
    params = "{" + ", ".join(f"{n!r}: {n}.astype(np.float64)" for n, _ in spec.param_shapes) + "}"
    args = ", ".join(f"to_torch({a}.astype(np.float64))" for a in program_args(spec).split(", "))
    lines = ["# -- the FP64 reference: the same program on float64 copies of the rounded inputs,",
             "#    each dtype it rounds to mapped to float64 (its exact mathematics)"]
    lines += _module("Program64", "The program with every rounding mapped to float64.", _program_params(spec),
                     program_args(spec), float64_source(spec.program))
    lines += ["", "", "with torch.no_grad():",
              f"    ref = to_numpy(Program64({params}, {float(spec.eps)!r})({args}))"]
    return "\n".join(lines) + "\n"
