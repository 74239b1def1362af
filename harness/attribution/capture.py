"""What a reader of a compiled graph's intermediates hands back."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class Unavailable(Exception):
    """The intermediates of this execution cannot be read, for the reason given."""


@dataclass(frozen=True)
class Intermediate:
    """One computed value of the compiled graph: its name there, op, dtype, value (NumPy, logical order)."""
    name: str
    op: str
    dtype: str
    value: np.ndarray


@dataclass
class Capture:
    """A re-run with the intermediates exposed.

    `output` is the index of the intermediate the graph returns (None: not
    among them); `rerun_output` what the re-run returned, to check against
    the path's own output; `changes` lists what exposing the intermediates
    is known to have changed in what the compiler does (each makes the
    attribution approximate); `method` says how they were read.
    """
    intermediates: list[Intermediate]
    output: int | None
    rerun_output: np.ndarray | None
    method: str
    changes: list[str] = field(default_factory=list)
