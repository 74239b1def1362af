"""The program stages of a case written as plain NumPy code, for the repro script's stage table.

`StageCodeWalker` walks the case's program (harness.attribution.stages) as
harness.program.expand's ExpandingWalker does, emitting for each stage the
NumPy line that computes its FP64 value (casts are exact in FP64, so they
are copies) instead of computing it. The stage order and labels are checked
against evaluate_expanded's, so the script's stages are normdiff's.
"""
from __future__ import annotations

from harness.program import ops
from harness.core.eps import torch_norm_eps
from harness.program.typecheck import (TensorType, binary_type, call_type, cat_type, linear_type, norm_info,
                                   reduce_axes, shape_result)
from harness.program.expand import STAT_DTYPE
from harness.program.ir import ones_value
from harness.program.walk import Walker, is_scalar


class _C:
    """A tensor of the emitted code: its variable, shape and dtype."""

    def __init__(self, name: str, shape: tuple[int, ...], dtype: str):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype


def _lit(v) -> str:
    return repr(float(v)) if isinstance(v, float) else repr(v)


class StageCodeWalker(Walker):
    """Emits `s<k> = <numpy expression>` per stage; `stages` lists (statement, op, dtype, variable)."""

    def __init__(self, env):
        super().__init__(env)
        self.lines: list[str] = []
        self.stages: list[tuple[str, str, str, str]] = []

    def shape(self, v):
        return v.shape

    def dtype(self, v):
        return v.dtype

    def _t(self, v):
        return v if is_scalar(v) else TensorType(v.shape, v.dtype)

    def _ref(self, v) -> str:
        return _lit(v) if is_scalar(v) else v.name

    def emit(self, op, expr, shape, dtype, comment=""):
        name = f"s{len(self.stages) + 1}"
        self.lines.append(f"{name} = {expr}" + (f"  # {comment}" if comment else ""))
        self.stages.append((self.target, op, dtype, name))
        return _C(name, shape, dtype)

    def binop(self, op, a, b):
        t = binary_type(op, self._t(a), self._t(b), self.line)
        expr = (f"np.power({self._ref(a)}, {self._ref(b)})" if op == "pow"
                else ops.get(op).text.format(a=self._ref(a), b=self._ref(b)))
        return self.emit(op, expr, t.shape, t.dtype)

    def neg(self, v):
        return self.emit("neg", ops.get("neg").text.format(a=v.name), v.shape, v.dtype)

    def cast(self, node, v, dtype, like):
        return self.emit("cast", f"{v.name}.copy()", v.shape, dtype, f"to {dtype}: exact in FP64")

    def unary(self, op, v):
        return self.emit(op, ops.get(op).text.format(a=v.name), v.shape, v.dtype)

    def shape_op(self, op, v, args):
        """A shape op computes nothing: a line of its own, but no stage (as the interpreter has none)."""
        shape = shape_result(op, v.shape, args, self.line)
        name = f"v{len(self.lines) + 1}"
        rank = len(v.shape)
        items = ", ".join(":".join("" if b is None else str(b) for b in i[1:]) if isinstance(i, tuple) else i
                          for i in args) if op == "index" else ""
        fields = {"a": v.name, "shape": tuple(shape), "args": args, "items": items,
                  "dims": [d % rank for d in args] if op == "permute" else None}
        if op == "narrow":
            dim = args[0] % rank
            start = args[1] + v.shape[dim] if args[1] < 0 else args[1]
            fields.update(dim=dim, start=start, stop=start + args[2])
        expr = ops.get(op).text.format(**fields)
        self.lines.append(f"{name} = {expr}  # {op}: layout only")
        return _C(name, shape, v.dtype)

    def cat(self, vs, dim):
        """Layout only, as a shape op: a line of its own, no stage."""
        t, d = cat_type([self._t(v) for v in vs], dim, self.line)
        name = f"v{len(self.lines) + 1}"
        expr = ops.get("cat").text.format(items=", ".join(v.name for v in vs), dim=d)
        self.lines.append(f"{name} = {expr}  # cat: layout only")
        return _C(name, t.shape, t.dtype)

    def linear(self, v, weight, bias):
        t = linear_type(self._t(v), self._t(weight), None if bias is None else self._t(bias), self.line)
        expr = f"{v.name} @ {weight.name}.T" + (f" + {bias.name}" if bias is not None else "")
        return self.emit("linear", expr, t.shape, t.dtype)

    def call(self, op, vs, options):
        t = call_type(op, [self._t(v) for v in vs], options, self.line)
        text = ops.get(op).text
        names = [v.name for v in vs]
        expr = (text(names, [v.shape for v in vs], options) if callable(text)
                else text.format(a=names[0], b=names[-1], **options))
        return self.emit(op, expr, t.shape, t.dtype)

    def reduce(self, node, v):
        axes, n, shape = reduce_axes(node, self._t(v), self.line)
        a = v.name
        if node.op == "var":
            dof = n - (1 if node.correction is None else node.correction)
            expr = f"((({a} - {a}.mean(axis={axes}, keepdims=True)) ** 2).sum(axis={axes}, keepdims=True) / {dof})"
        else:
            expr = f"{a}.{node.op}(axis={axes}, keepdims=True)"
        return self.emit(node.op, f"{expr}.reshape({tuple(shape)})", shape, v.dtype)

    def norm(self, node, v, normalized_shape, groups, weight, bias, eps):
        types = [None if p is None else self._t(p) for p in (weight, bias)]
        info = norm_info(node, self._t(v), normalized_shape, groups, *types, eps, self.line)
        kind, shape, rank = node.kind, v.shape, len(v.shape)
        eps = torch_norm_eps(kind, eps)
        a, axes = v.name, info.axes
        if kind == "group_norm":
            a, axes = f"{v.name}.reshape({shape[0]}, {info.groups}, -1)", (2,)
        part = lambda name, expr: self.emit(f"{kind}.{name}", expr, (), STAT_DTYPE)  # noqa: E731 (no later line reads a part's shape)
        if kind == "rms_norm":
            sq = part("square", f"{a} * {a}")
            stat = part("mean_square", f"{sq.name}.mean(axis={axes}, keepdims=True)")
            stat_eps = part("ms_eps", f"{stat.name} + {_lit(float(eps))}")
            centered = a
        else:
            mean = part("mean", f"{a}.mean(axis={axes}, keepdims=True)")
            centered = f"({a} - {mean.name})"
            part("centered", f"{centered}.reshape({tuple(shape)})")
            var = part("variance", f"({centered} ** 2).mean(axis={axes}, keepdims=True)")
            stat_eps = part("var_eps", f"{var.name} + {_lit(float(eps))}")
        part("std", f"np.sqrt({stat_eps.name})")
        rstd = part("rstd", f"1.0 / np.sqrt({stat_eps.name})")
        z = f"({centered} * {rstd.name}).reshape({tuple(shape)})"
        pshape = shape[rank - len(axes):] if kind != "group_norm" else (shape[1],) + (1,) * (rank - 2)
        w = f"{weight.name}.reshape({tuple(pshape)})" if weight is not None else None
        b = f"{bias.name}.reshape({tuple(pshape)})" if bias is not None else None
        if weight is not None or bias is not None or v.dtype != STAT_DTYPE:
            z = part("normalize", z).name
            if kind != "rms_norm" and w and b:
                z = part("scale", f"{z} * {w}").name
                w = None
        out = z + (f" * {w}" if w else "") + (f" + {b}" if b else "")
        return self.emit(kind, out, shape, v.dtype)


def stage_lines(program, info, names: dict[str, str]) -> tuple[list[str], list[tuple[str, str, str, str]]]:
    """(code lines, [(statement, op, dtype, variable)]) of a Program checked against `info`.

    `names` maps the program's names (x, y, r, w, b, s) to the script's arrays
    (a catalog case calls its parameters weight and bias); a parameter the
    program reads but the case lacks is ones (w, s) or zeros (b), as in the module.
    """
    env, lines = {"eps": info.eps}, []
    for name in info.inputs:
        lines.append(f"X_{name} = {names.get(name, name)}.astype(np.float64)")
        env[name] = _C(f"X_{name}", *info.input_type(name))
    for name in program.params:
        shape = tuple(info.param_shapes[name])
        source = names.get(name)
        lines.append(f"P_{name} = {source}.astype(np.float64)" if source
                     else f"P_{name} = np.full({shape}, {ones_value(name)})")
        env[name] = _C(f"P_{name}", shape, info.weight_dtype)
    walker = StageCodeWalker(env)
    walker.run(program)
    return lines + walker.lines, walker.stages
