"""The controls of a bug report (`normdiff repro --report`): executions that should pass while the bug shows.

A maintainer believes a report whose controls pass: apache/tvm#20909 shows
the same LayerNorm right without the rewrite, right when computed in float32
inside and cast back, and right on float32 input. Each control here is such
an execution, as plain data: (what it is, its spec, its path), or the reason
there is none for this case. The report runs them through the engine and
shows each with its result, a failing one included.

* **the rewrite off**: the same case on the path's `control_path` (tvm for
  tvm-decompose, executorch for the recompose paths, …: each path declares it).
* **float32 inside**: the same norm computed on float32 copies and cast back to
  the case's output dtype (a float32 case too, where its program rounds to
  float16 or bfloat16 inside). A float16/bfloat16 layer_norm is the catalog's
  `upcast` style (open_clip's LayerNormFp32, the seed's own control); any
  other case with a program (a program case, a layer_norm/rms_norm style's
  program, a group_norm) is that program with every input and parameter read
  through `.float()`, every narrowing cast mapped to float32 and the result
  cast back. instance_norm and batch_norm have no program: none, said so.
* **float32 input**: the same case in float32 (its weight dtype too, where it
  was the input's).
"""
from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

from harness import paths
from harness.oracle.inputs import make_inputs
from harness.oracle.reference import reference
from harness.oracle.twins import style_case
from harness.spec import CaseSpec, SpecError

_NARROW = {"float16", "bfloat16"}
_NARROW_METHODS = {"half", "bfloat16"}


@dataclass(frozen=True)
class Control:
    """One control: its name, what it shows, and its (spec, path); or None there and why not in `why`."""

    name: str
    what: str
    spec: CaseSpec | None
    path: str | None
    why: str = ""

    @property
    def runs(self) -> bool:
        return self.spec is not None


class _Float32Inside(ast.NodeTransformer):
    """Reads of the case's inputs and parameters -> `.float()`; float16/bfloat16 casts -> float32."""

    def __init__(self, names: set[str]):
        self.names = names

    def visit_Name(self, node: ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id in self.names:
            call = ast.Call(ast.Attribute(ast.Name(node.id, ast.Load()), "float", ast.Load()), [], [])
            return ast.copy_location(call, node)
        return node

    def visit_Attribute(self, node: ast.Attribute):
        if (isinstance(node.value, ast.Name) and node.value.id == "x" and node.attr == "dtype"
                and isinstance(node.ctx, ast.Load)):
            return node  # x.dtype: the cast back of the program, kept as written (x itself is not read)
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "torch" and node.attr in _NARROW:
            return ast.copy_location(ast.Attribute(node.value, "float32", node.ctx), node)
        return node

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in _NARROW_METHODS and not node.args and not node.keywords:
            node.func = ast.copy_location(ast.Attribute(f.value, "float", f.ctx), f)
        return node


def float32_program(program: str, names: set[str], out_dtype: str | tuple[str, ...]) -> str:
    """`program` computed in float32 and cast back to `out_dtype`: its reads of `names` through `.float()`,
    its float16/bfloat16 casts to float32, its return value `.to(torch.OUT_DTYPE)` (each of several returned
    values to its own, `out_dtype` then a tuple)."""
    fn = ast.parse("def forward():\n" + textwrap.indent(program, "    ")).body[0]
    fn = _Float32Inside(names).visit(fn)
    last = fn.body[-1]

    def back(value, dtype):
        to = ast.Attribute(ast.Name("torch", ast.Load()), dtype, ast.Load())
        return ast.Call(ast.Attribute(value, "to", ast.Load()), [to], [])

    if isinstance(last, ast.Return) and isinstance(last.value, ast.Tuple):
        fn.body[-1] = ast.Return(ast.Tuple([back(v, d) for v, d in zip(last.value.elts, out_dtype)], ast.Load()))
    elif isinstance(last, ast.Return) and last.value is not None:
        fn.body[-1] = ast.Return(back(last.value, out_dtype))
    return "\n".join(ast.unparse(ast.fix_missing_locations(stmt)) for stmt in fn.body)


def _program_of(spec: CaseSpec) -> tuple[str, dict[str, list[int]]] | None:
    """(program text, param_shapes) of the case: its own, its style's, a group_norm's F.group_norm; or None."""
    if spec.program is not None:
        return spec.program, {n: list(s) for n, s in spec.param_shapes}
    if spec.pattern in ("layer_norm", "rms_norm"):
        text, _ = style_case(spec)
        c = spec.shape[-1]
        shapes = {"w": [c], "b": [c]} if spec.affine == "weight_bias" else {"w": [c]} if spec.affine == "weight" else {}
        return text, shapes
    if spec.pattern == "group_norm" and spec.layout == "contiguous":
        c = spec.shape[1]
        affine = spec.affine != "none"
        w, b = ("w" if affine else "None"), ("b" if spec.affine == "weight_bias" else "None")
        shapes = {n: [c] for n in ("w", "b") if n in (w, b)}
        return f"return F.group_norm(x, {spec.groups}, {w}, {b}, eps)", shapes
    return None


def _narrows(spec: CaseSpec) -> bool:
    """Whether the case's program rounds to float16/bfloat16 somewhere (a float32 case can compute in half)."""
    if spec.program is None:
        return False
    tree = ast.parse(spec.program)
    return any(isinstance(n, ast.Attribute) and (n.attr in _NARROW and isinstance(n.value, ast.Name)
                                                 and n.value.id == "torch" or n.attr in _NARROW_METHODS)
               for n in ast.walk(tree))


def float32_inside(spec: CaseSpec) -> tuple[CaseSpec | None, str]:
    """(the same norm computed in float32 and cast back, how) or (None, why there is none)."""
    if spec.dtype == "float32" and spec.weight_dtype == "float32" and not _narrows(spec):
        return None, "the case is float32 already"
    raw = spec.to_dict()
    if spec.program is None and spec.pattern == "layer_norm" and spec.style in ("module", "manual"):
        raw.update(style="upcast", cast=None)
        return CaseSpec.from_dict(raw), "the catalog's `upcast` style (open_clip's LayerNormFp32): x, weight and " \
                                        "bias .float(), F.layer_norm, the result cast back"
    found = _program_of(spec)
    if found is None:
        return None, f"this {spec.pattern} case has no program to compute in float32 (the program language has no " \
                     f"{spec.pattern})"
    program, shapes = found
    ref = reference(spec, make_inputs(spec))
    out_dtype = tuple(r.out_dtype for r in ref.each) if ref.outputs else ref.out_dtype
    names = {"x", *spec.inputs_dict, *shapes}
    text = float32_program(program, names, out_dtype)
    out = {k: raw[k] for k in ("pattern", "dtype", "weight_dtype", "shape", "layout", "eps", "input", "params",
                               "seed") if k in raw}
    out.update(program=text, param_shapes=shapes)
    if spec.inputs_dict:
        out["inputs"] = spec.inputs_dict
    try:
        return CaseSpec.from_dict(out), "the case's program on float32 copies of its inputs and parameters, " \
                                        f"cast back to {' and '.join(out_dtype) if ref.outputs else out_dtype}"
    except SpecError as exc:
        return None, f"its float32 program does not check ({exc})"


def float32_input(spec: CaseSpec) -> tuple[CaseSpec | None, str]:
    """(the same case on float32 input, how) or (None, why there is none)."""
    if spec.dtype == "float32":
        return None, "the case's input is float32 already"
    raw = spec.to_dict()
    raw["dtype"] = "float32"
    if spec.weight_dtype == spec.dtype:
        raw["weight_dtype"] = "float32"
    try:
        return CaseSpec.from_dict(raw), "the same case with float32 input" + (
            " and parameters" if spec.weight_dtype == spec.dtype else "")
    except SpecError as exc:
        return None, f"the case does not take float32 input ({exc})"


def controls(spec: CaseSpec, path: str, catalog: tuple[tuple[CaseSpec, str], ...] = ()) -> list[Control]:
    """The report's controls of `spec` on `path`: the three above, then the catalog entry's own not among them."""
    off = paths.get(path).control_path
    out = [Control("rewrite off", f"the same case on `{off}`, the path without the rewrite", spec, off) if off
           else Control("rewrite off", "", None, None, f"`{path}` applies no rewrite of its own (no control path)")]
    inside, how = float32_inside(spec)
    out.append(Control("float32 inside", how if inside else "", inside, path if inside else None,
                       "" if inside else how))
    wide, how = float32_input(spec)
    out.append(Control("float32 input", how if wide else "", wide, path if wide else None, "" if wide else how))
    seen = {(c.spec.case_id, c.path) for c in out if c.runs}
    for s, p in catalog:
        if (s.case_id, p) not in seen:
            seen.add((s.case_id, p))
            out.append(Control("catalog control", f"the catalog entry's control: {s} on `{p}`", s, p))
    return out
