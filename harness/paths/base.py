"""The one face every path shows: prepare a case once, run inputs many times.

A path module defines a subclass of `Path`; `prepare` does the expensive work
(export, compile, lowering) and returns a `Prepared` whose `run` is cheap.
Failures are raised as `StageError` (export | compile | run) or `Unsupported`,
so the runner can turn them into records without knowing the path.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


class Unsupported(Exception):
    """The path cannot take this case, for a documented reason."""


class StageError(Exception):
    """An exception raised inside one stage of a path."""

    def __init__(self, stage: str, message: str):
        super().__init__(f"{stage}: {message}")
        self.stage = stage
        self.message = message


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    line = text.splitlines()[0].strip()
    return f"{type(exc).__name__}: {line}"[:500]


STAGES = ("export", "compile", "run")


@contextlib.contextmanager
def stage(name: str, step: str | None = None):
    """Re-raise anything from the block as a StageError of stage `name`.

    `name` is one of DESIGN's stages (export, compile, run); `step` names the
    finer step inside it (e.g. "import" for TVM's frontend), which prefixes
    the message.
    """
    assert name in STAGES, name
    try:
        yield
    except (Unsupported, StageError):
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes a record
        message = first_line(exc)
        raise StageError(name, f"{step}: {message}" if step else message) from exc


@dataclass
class Prepared:
    """A compiled case: `run(x)` maps an input array to the output array.

    `x` is a NumPy array in the case's dtype (bfloat16 as ml_dtypes.bfloat16),
    in logical (contiguous) order; the output is returned the same way.
    `facts` holds JSON-able facts about what the path did (delegated or not,
    which rewrite fired, …); they are copied into every record.
    """

    run_fn: Callable[[np.ndarray], np.ndarray]
    facts: dict[str, Any] = field(default_factory=dict)

    def run(self, x: np.ndarray) -> np.ndarray:
        with stage("run"):
            return self.run_fn(x)


class Path:
    """Base of every path. Subclasses set `name` and implement `prepare`."""

    name: str = ""
    # The Python packages whose versions records carry (distribution names).
    packages: tuple[str, ...] = ("torch",)

    def structure_key(self, spec) -> str:
        """Cases with the same key share one prepared artifact."""
        return spec.structure_key()

    def prepare(self, spec, module, example) -> Prepared:
        """Build the artifact for `spec`.

        `module` is the eager torch module (parameters already set, in eval
        mode); `example` is a torch tensor of the case's input (dtype and
        memory format as the spec says). Raise Unsupported or StageError.
        """
        raise NotImplementedError
