"""The capture of a whole model (harness.engine.model_capture) in a worker process of its own: the model is user code.

One process, started from the forkserver as the runner's workers are, with the
parent's import path; its answer (a Capture, plain data) comes back through a
pipe. A model that cannot be built or run is the Capture's `problem` (one
line); a worker that dies or outlives `timeout` is one too. Only the process
started here is ever stopped.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys

from harness.engine.model_capture import Capture, ModelTarget


def _serve(conn, target: ModelTarget, sys_path: tuple[str, ...], env: dict, log: str) -> None:
    import warnings

    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)  # the libraries' chatter, a crash's stack
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.path[:0] = [p for p in sys_path if p not in sys.path]
    os.environ.update(env)
    warnings.filterwarnings("ignore")  # library deprecation chatter is not a finding
    try:
        from harness.engine.model_capture import capture
        from harness.modules.load import ModuleSpecError

        try:
            result = capture(target)
        except ModuleSpecError as exc:
            result = Capture(problem=str(exc), usage=True)
        except MemoryError as exc:
            result = Capture(problem=f"the model ran out of memory ({str(exc) or 'MemoryError'})")
        except Exception as exc:  # noqa: BLE001 - user code: any failure is one line
            text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
            result = Capture(problem=f"the model failed: {type(exc).__name__}: {text}"[:400])
        conn.send(result)
    finally:
        conn.close()


def capture_in_worker(target: ModelTarget, timeout: float, log: str) -> Capture:
    """The Capture of `target`, made in a worker process (its stdout and stderr into `log`)."""
    ctx = mp.get_context("forkserver")
    parent, child = ctx.Pipe(duplex=False)
    env = {k: v for k, v in os.environ.items() if k.startswith("NORMDIFF_")}
    proc = ctx.Process(target=_serve, args=(child, target, tuple(sys.path), env, log), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            return Capture(problem=f"the model's capture took longer than --timeout {timeout:g} s")
        try:
            return parent.recv()
        except EOFError:
            proc.join(5)
            return Capture(problem=f"the model's worker died (exit code {proc.exitcode})")
    finally:
        if proc.is_alive():
            proc.join(5)
        if proc.is_alive():
            proc.kill()  # the process started above, by its handle
            proc.join()
