"""Test-only paths that misbehave the way compilers do: abort, hang, or just take time.

Each behaves exactly like `eager` (same module, same output) except on the
inputs that trigger it, so every other record of a run is a real one.
Register with harness.paths.register(name, "tests.crashy_paths:AbortPath")
or NORMDIFF_EXTRA_PATHS; workers import this module by that name, so the
repository root must be on their sys.path (it is when run from the root).
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np

from harness.paths.base import Prepared, input_arrays
from harness.paths.eager import EagerPath

TRIGGER = 7.0  # an input that is constant 7.0 triggers the misbehaviour


def _triggered(x: np.ndarray) -> bool:
    flat = np.asarray(x, dtype=np.float64).ravel()
    return bool(flat.size) and bool(np.all(flat == TRIGGER))


class _Wrapped(EagerPath):
    def misbehave(self) -> None:
        raise NotImplementedError

    def prepare(self, spec, module, example):
        prepared = super().prepare(spec, module, example)
        inner = prepared.run_fn

        def run_fn(x):
            if _triggered(x):
                self.misbehave()
            return inner(x)

        prepared.run_fn = run_fn
        return prepared


class AbortPath(_Wrapped):
    """SIGABRT in the middle of a run, as a failed C++ check in a compiler does."""

    def misbehave(self) -> None:
        os.abort()


class SleepPath(_Wrapped):
    """Never answers (a hung compile or an infinite loop in a kernel)."""

    def misbehave(self) -> None:
        time.sleep(600)


STALL_TOKEN_MIN = 1000  # StallPath stalls on a constant input of an integer value this large or larger


def stall_pid_file(token: int) -> str:
    """Where StallPath writes the pid of the worker stalled on the constant input `token`."""
    return os.path.join(tempfile.gettempdir(), f"normdiff-stall-{token}.pid")


class StallPath(EagerPath):
    """Eager's output, but on a constant input of an integer value >= STALL_TOKEN_MIN (a token the
    test picks, so concurrent test runs cannot mix up their workers; a Ray actor gets no test env)
    the worker writes its pid to stall_pid_file(token) and waits: the test kills it from outside,
    as the OOM killer or an operator would."""

    def prepare(self, spec, module, example):
        prepared = super().prepare(spec, module, example)
        inner = prepared.run_fn

        def run_fn(x):
            flat = np.asarray(x, dtype=np.float64).ravel()
            token = flat[0] if flat.size else 0.0
            if token >= STALL_TOKEN_MIN and token == int(token) and np.all(flat == token):
                target = stall_pid_file(int(token))
                with open(target + ".tmp", "w") as fh:
                    fh.write(str(os.getpid()))
                os.replace(target + ".tmp", target)  # the test never reads half a pid
                time.sleep(600)
            return inner(x)

        prepared.run_fn = run_fn
        return prepared


class SlowPath(EagerPath):
    """Every run takes SLOW_SECONDS, so a test can stop a run half way or watch groups split."""

    SLOW_SECONDS = 0.25

    def prepare(self, spec, module, example):
        prepared = super().prepare(spec, module, example)
        inner = prepared.run_fn

        def run_fn(x):
            time.sleep(self.SLOW_SECONDS)
            return inner(x)

        prepared.run_fn = run_fn
        return prepared


ABORT_ROW = 100  # AbortOnLongRows aborts on rows this long or longer


class AbortOnLongRows(EagerPath):
    """Eager's output, but the worker process aborts (SIGABRT) on a row of ABORT_ROW+ elements
    (of x, the first input of a program that reads more)."""

    def prepare(self, spec, module, example) -> Prepared:
        eager = EagerPath().prepare(spec, module, example)

        def run(x):
            if input_arrays(x)[0].shape[-1] >= ABORT_ROW:
                os.abort()
            return eager.run_fn(x)

        return Prepared(run, {})


HOG_GB = 6  # HogPath asks for this much at once on the trigger input: past a `run --max-memory 4` worker


class HogPath(_Wrapped):
    """A runaway allocation (a compile that blows up): HOG_GB of address space at once.

    Under a worker memory limit below HOG_GB the allocation is refused
    (MemoryError). Without one it succeeds and the path answers as eager
    does; it touches one page per MB only, so a test that lost its limit
    fails by a pass, not by taking the machine's memory.
    """

    def misbehave(self) -> None:
        hog = np.empty(HOG_GB * 2**30, dtype=np.uint8)
        hog[:: 2**20] = 1
