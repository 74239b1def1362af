"""Which ATen ops of an exported norm the lifter writes in the program language (the op table's, DESIGN §7).

The zoo reports, per implementation, the ops of its graph the language does not hold
(`outside`): the lifter's handlers (harness/modules/lift_ops.py, read from the op table
harness/program/ops.py) are the one definition of what it holds.
"""
from __future__ import annotations

from harness.modules.lift_ops import HANDLERS, SKIP


def packet(op: str) -> str:
    """`aten.pow.Tensor_Scalar` -> `pow`; `<built-in function getitem>` -> `getitem`."""
    if op.startswith("<built-in function "):
        return op.removeprefix("<built-in function ").rstrip(">")
    parts = op.split(".")
    return parts[1] if parts[0] == "aten" and len(parts) > 1 else parts[-1] if len(parts) > 1 else op


def outside(ops) -> list[str]:
    """The ops (full names) of `ops` that the language does not express, export's bookkeeping left out."""
    return sorted(o for o in ops if packet(o) not in HANDLERS and packet(o) not in SKIP)
