"""Which ATen ops of an exported norm the program language of DESIGN §7 expresses today.

This is the zoo's reading of §7 by ATen name, kept here only to report what the lifter and the
language must still cover (the probe's `outside`); when the op table of issue 23 (one entry per op,
with its ATen names, in harness/program/) lands, it replaces this module.
"""
from __future__ import annotations

# §7's operators, functions and methods, by the ATen packet torch.export gives for them.
EXPRESSED = frozenset({
    "add", "sub", "rsub", "mul", "div", "pow", "neg",  # + - * / ** and unary -
    "rsqrt", "sqrt", "abs", "square", "reciprocal",  # torch.rsqrt sqrt abs square reciprocal
    "mean", "sum", "var",  # reductions (DIM an int or a list; keepdim; correction)
    "layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm", "group_norm", "native_group_norm",
    "to", "_to_copy", "type_as",  # .float() .half() .bfloat16() .to(DTYPE) .type_as(T)
    "contiguous", "clone",  # .to(memory_format=torch.contiguous_format)
})
# What export adds that is not a computation: metadata checks, aliases, symbolic sizes.
BOOKKEEPING = frozenset({
    "_assert_tensor_metadata", "_assert_scalar", "sym_size", "sym_constrain_range_for_size", "alias",
    "detach", "lift_fresh_copy",
})


def packet(op: str) -> str:
    """`aten.pow.Tensor_Scalar` -> `pow`; `<built-in function getitem>` -> `getitem`."""
    if op.startswith("<built-in function "):
        return op.removeprefix("<built-in function ").rstrip(">")
    parts = op.split(".")
    return parts[1] if parts[0] == "aten" and len(parts) > 1 else parts[-1] if len(parts) > 1 else op


def outside(ops) -> list[str]:
    """The ops (full names) of `ops` that the language does not express, bookkeeping left out."""
    return sorted(o for o in ops if packet(o) not in EXPRESSED and packet(o) not in BOOKKEEPING)
