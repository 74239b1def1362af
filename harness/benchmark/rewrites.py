"""Rewrites of a program's IR: the equivalent forms a correct rewrite may emit, and the ways a wrong one breaks a norm.

Each rewrite is a function Program -> (Program, sites) that rebuilds the
frozen IR (harness.program.ir) with one construct changed wherever it occurs;
`sites` = 0 means the program has no such construct (the bug class does not
apply to it). The IR is walked generically (every dataclass field that holds
IR), so a new node kind passes through untouched. Names are resolved per
statement (a name means its latest assignment before the statement reading
it), so a construct spread over statements (`v = ...; h * torch.rsqrt(v +
eps)`) is recognised as if written in one expression.

Value-preserving rewrites (the near-miss catalog's legitimate variants that
change bits under torch's rules: rsqrt -> 1 / sqrt, a multiply by rsqrt -> a
division by sqrt; its others, sum / n for a float32 mean, h * h or square()
for pow(2), pow(-0.5) for rsqrt, give eager's very bits, and sum / n of a
float16 tensor is not a mean: the float16 sum overflows). Breaking ones:
eps moved across the root or dropped, the weight or bias dropped, the weight
applied before the cast back, the scaled tensor swapped for the one the
statistic was taken of, a one-pass variance, a mean of squares divided by
n - 1, the scaled tensor held in float16.
"""
from __future__ import annotations

from dataclasses import fields, replace

from harness.program.ir import (
    Assign, BinOp, Cast, DType, Name, Norm, Number, Program, Reduce, ShapeOf, Unary, is_node, squared,
)

EPS = Name("eps")
MEAN_UNBIASED = "mean_unbiased"  # a marker reduction only the renderings run: the sum over n - 1


def transform(node, fn):
    """`node` rebuilt bottom-up: children first, then fn(child) (None keeps the node as rebuilt)."""
    if isinstance(node, tuple):
        items = tuple(transform(n, fn) for n in node)
        return items if any(a is not b for a, b in zip(items, node)) else node
    if not is_node(node):
        return node
    changes = {}
    for f in fields(node):
        value = getattr(node, f.name)
        if is_node(value) or (isinstance(value, tuple) and any(is_node(v) for v in value)):
            new = transform(value, fn)
            if new is not value:
                changes[f.name] = new
    node = replace(node, **changes) if changes else node
    out = fn(node)
    return node if out is None else out


class Scope:
    """Name resolution per statement: what each name means where statement `i` reads it."""

    def __init__(self, program: Program):
        self.visible: list[dict] = []
        env: dict = {}
        for i, stmt in enumerate(program.statements):
            self.visible.append(dict(env))
            if isinstance(stmt, Assign):
                env[stmt.name] = i
        self.program = program

    def resolve(self, expr, i: int):
        """`expr` (read at statement i) with every assigned name replaced by its definition."""
        names = self.visible[i]

        def inline(node):
            if isinstance(node, Name) and node.id in names:
                j = names[node.id]
                return self.resolve(self.program.statements[j].value, j)
            return None

        return transform(expr, inline)


def _strip_casts(expr):
    return transform(expr, lambda n: n.operand if isinstance(n, Cast) else None)


def rewrite(program: Program, make_fn) -> tuple[Program, int]:
    """Apply `make_fn(scope, i) -> fn` to each statement's expression; (the new program, sites changed)."""
    scope = Scope(program)
    count = [0]
    statements = []
    for i, stmt in enumerate(program.statements):
        fn = make_fn(scope, i)

        def counted(node, fn=fn):
            out = fn(node)
            if out is not None:
                count[0] += 1
            return out

        statements.append(replace(stmt, value=transform(stmt.value, counted)))
    return replace(program, statements=tuple(statements)), count[0]


def _stateless(fn):
    return lambda scope, i: fn


# ------------------------------------------------------------------ recognisers
def _eps_add(node):
    """X when node is X + eps (either side), else None."""
    if isinstance(node, BinOp) and node.op == "add":
        if node.right == EPS:
            return node.left
        if node.left == EPS:
            return node.right
    return None


def _reads_only(node, name: str) -> bool:
    """Whether `node` is `name` up to casts and adding numbers (w, w.float(), 1 + w.float())."""
    if isinstance(node, Name):
        return node.id == name
    if isinstance(node, Cast):
        return _reads_only(node.operand, name)
    if isinstance(node, BinOp) and node.op == "add":
        return (isinstance(node.left, Number) and _reads_only(node.right, name)) or \
               (isinstance(node.right, Number) and _reads_only(node.left, name))
    return False


def _statistic_base(scale):
    """For a resolved scale (rsqrt of a mean of squares, 1 / sqrt, pow(-0.5), or a sqrt to divide by),
    the tensor whose squares the statistic averages; None if `scale` is not one."""
    while isinstance(scale, Cast):
        scale = scale.operand
    root = None
    if isinstance(scale, Unary) and scale.op in ("rsqrt", "sqrt"):
        root = scale.operand
    elif isinstance(scale, BinOp) and scale.op == "pow" and scale.right in (Number(-0.5), Number(0.5)):
        root = scale.left
    elif isinstance(scale, BinOp) and scale.op == "div" and isinstance(scale.left, Number):
        return _statistic_base(scale.right)
    elif isinstance(scale, BinOp) and scale.op == "add" and EPS in (scale.left, scale.right):
        return _statistic_base(scale.left if scale.right == EPS else scale.right)
    if root is None:
        return None
    stat = _eps_add(root) or root
    while isinstance(stat, Cast):
        stat = stat.operand
    if isinstance(stat, BinOp) and stat.op == "div" and isinstance(stat.left, Reduce):
        stat = stat.left
    if isinstance(stat, Reduce) and stat.op in ("mean", "sum"):
        return squared(stat.operand)
    return None


def _scale_sites(scope: Scope, i: int, node):
    """(scaled tensor A, the statistic's base B resolved, side of A) when node is A * scale or A / root."""
    if not isinstance(node, BinOp) or node.op not in ("mul", "div"):
        return None
    sides = [(node.left, node.right, "left")] + ([(node.right, node.left, "right")] if node.op == "mul" else [])
    for a, scale, side in sides:
        if isinstance(a, Number):  # 1 / sqrt(S): a reciprocal, not a scaled tensor
            continue
        base = _statistic_base(scope.resolve(scale, i))
        if base is not None:
            return a, base, side
    return None


# ------------------------------------------------------------------ value-preserving rewrites
def rsqrt_as_reciprocal_sqrt(program: Program):
    def fn(node):
        if isinstance(node, Unary) and node.op == "rsqrt":
            return BinOp("div", Number(1), Unary("sqrt", node.operand))
        return None
    return rewrite(program, _stateless(fn))


def multiply_as_divide(program: Program):
    """A * rsqrt(S) -> A / sqrt(S)."""
    def fn(node):
        if isinstance(node, BinOp) and node.op == "mul":
            for a, r in ((node.left, node.right), (node.right, node.left)):
                if isinstance(r, Unary) and r.op == "rsqrt":
                    return BinOp("div", a, Unary("sqrt", r.operand))
        return None
    return rewrite(program, _stateless(fn))


# ------------------------------------------------------------------ breaking rewrites
def eps_moved(program: Program):
    """eps moved across the root: rsqrt(S + eps) -> 1 / (sqrt(S) + eps), sqrt(S + eps) -> sqrt(S) + eps,
    (S + eps) ** -0.5 -> 1 / (S ** 0.5 + eps); and eps already outside (sqrt(S) + eps) moved inside."""
    def fn(node):
        if isinstance(node, Unary) and node.op in ("rsqrt", "sqrt") and _eps_add(node.operand) is not None:
            outside = BinOp("add", Unary("sqrt", _eps_add(node.operand)), EPS)
            return BinOp("div", Number(1), outside) if node.op == "rsqrt" else outside
        if isinstance(node, BinOp) and node.op == "pow" and node.right == Number(-0.5) \
                and _eps_add(node.left) is not None:
            return BinOp("div", Number(1), BinOp("add", BinOp("pow", _eps_add(node.left), Number(0.5)), EPS))
        inner = _eps_add(node)
        if isinstance(inner, Unary) and inner.op == "sqrt":
            return Unary("sqrt", BinOp("add", inner.operand, EPS))
        return None
    return rewrite(program, _stateless(fn))


def eps_dropped(program: Program):
    def fn(node):
        if _eps_add(node) is not None:
            return _eps_add(node)
        if isinstance(node, Norm):
            return replace(node, eps=Number(0.0))
        return None
    return rewrite(program, _stateless(fn))


def _param_dropped(name: str, op: str, field: str):
    def run(program: Program):
        def fn(node):
            if isinstance(node, BinOp) and node.op == op:
                if _reads_only(node.left, name):
                    return node.right
                if _reads_only(node.right, name):
                    return node.left
            if isinstance(node, Norm) and getattr(node, field) is not None:
                return replace(node, **{field: None})
            return None
        return rewrite(program, _stateless(fn))
    return run


weight_dropped = _param_dropped("w", "mul", "weight")
bias_dropped = _param_dropped("b", "add", "bias")


def weight_before_cast(program: Program):
    """w * h.to(x.dtype) -> (w * h).to(x.dtype): the weight applied before the cast back, not after."""
    def make(scope, i):
        def fn(node):
            if not (isinstance(node, BinOp) and node.op == "mul"):
                return None
            for w, other in ((node.left, node.right), (node.right, node.left)):
                cast = scope.resolve(other, i) if isinstance(other, Name) else other
                if _reads_only(w, "w") and isinstance(cast, Cast):
                    product = BinOp("mul", w, cast.operand) if w is node.left else BinOp("mul", cast.operand, w)
                    return replace(cast, operand=product)
            return None
        return fn
    return rewrite(program, make)


def scaled_swapped(program: Program):
    """A * rsqrt(mean(B ** 2) + eps) with A not B (up to casts) -> B * rsqrt(...): the rewrite that
    matches the statistic and rebuilds the norm of the tensor it squares (pytorch/executorch#24428)."""
    def make(scope, i):
        def fn(node):
            site = _scale_sites(scope, i, node)
            if site is None:
                return None
            a, base, side = site
            if _strip_casts(scope.resolve(a, i)) == _strip_casts(base):
                return None
            return replace(node, left=base) if side == "left" else replace(node, right=base)
        return fn
    return rewrite(program, make)


def scaled_through_float16(program: Program):
    """The scaled tensor A of A * rsqrt(...) held in float16 (in a float32 model)."""
    def make(scope, i):
        def fn(node):
            site = _scale_sites(scope, i, node)
            if site is None:
                return None
            a, _, side = site
            held = Cast(Cast(a, "to", DType("float16")), "to", DType("float32"))
            return replace(node, left=held) if side == "left" else replace(node, right=held)
        return fn
    return rewrite(program, make)


def one_pass_variance(program: Program):
    """mean((A - M) ** 2) with M the mean of A -> mean(A * A) - M * M (E[x²] - E[x]²)."""
    def make(scope, i):
        def fn(node):
            if not (isinstance(node, Reduce) and node.op == "mean"):
                return None
            d = squared(node.operand)
            if not (isinstance(d, BinOp) and d.op == "sub"):
                return None
            m = scope.resolve(d.right, i)
            if isinstance(m, Reduce) and m.op == "mean" and m.dims == node.dims \
                    and _strip_casts(m.operand) == _strip_casts(scope.resolve(d.left, i)):
                return BinOp("sub", replace(node, operand=BinOp("mul", d.left, d.left)), BinOp("mul", d.right, d.right))
            return None
        return fn
    return rewrite(program, make)


def mean_square_unbiased(program: Program):
    """A mean of squares taken as the sum over n - 1 (and sum(B ** 2) / n as over n - 1)."""
    def fn(node):
        if isinstance(node, Reduce) and node.op == "mean" and squared(node.operand) is not None:
            return replace(node, op=MEAN_UNBIASED)
        if isinstance(node, BinOp) and node.op == "div" and isinstance(node.left, Reduce) \
                and node.left.op == "sum" and squared(node.left.operand) is not None \
                and isinstance(node.right, (ShapeOf, Number)):
            return replace(node, right=BinOp("sub", node.right, Number(1)))
        return None
    return rewrite(program, _stateless(fn))
