"""Run many repro scripts as `python SCRIPT` would, in one fresh interpreter: their exit codes and outputs.

`normdiff bugs --check` runs every catalog entry's full and short script. One
interpreter start per script (about 4 s of imports: torch, tvm, executorch)
would be most of the time, so each interpreter runs its scripts one after
another as `__main__` (runpy, as tests/paths/test_registry.py does), each with
its own output file. A script that kills the interpreter (a crash in a
library) or runs over `timeout` seconds gets its own code (the signal, or -1)
and the rest run in a fresh interpreter: one bad script never costs another's
verdict.
"""
from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass

TIMEOUT = 600.0  # seconds a script may run (a TVM compile of a decomposed norm takes a few)
TIMED_OUT = -1   # the code of a script that ran over the timeout

# Each script as `python SCRIPT` runs it (as __main__, its own folder first on sys.path, which the script takes
# off itself), its stdout and stderr to SCRIPT.out; a line `MARK CODE SCRIPT` on stdout once it ends (a library
# may write to the file descriptor itself: the mark tells the runner's lines from its).
MARK = "normdiff-script-ended"
RUNNER = f"""
import contextlib, io, os, runpy, sys, traceback
path = list(sys.path)
for script in sys.argv[1:]:
    out, code = io.StringIO(), 0
    sys.path[:] = [os.path.dirname(script)] + path
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    with open(script + ".out", "w", encoding="utf-8") as fh:
        fh.write(out.getvalue())
    print("\\n{MARK}", code, script, flush=True)
"""


@dataclass(frozen=True)
class Ran:
    """One script's exit code (a negative signal number where it killed the interpreter; TIMED_OUT) and output."""

    script: str
    code: int
    output: str


def _lines(proc, into: queue.Queue) -> None:
    for line in proc.stdout:
        into.put(line)
    into.put(None)


def _batch(scripts: list[str], timeout: float, done: dict[str, Ran]) -> None:
    """Run `scripts` in one interpreter, then what is left after one kills it or hangs, in a fresh one."""
    left = list(scripts)
    while left:
        proc = subprocess.Popen([sys.executable, "-c", RUNNER, *left], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, cwd=os.path.dirname(left[0]))
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_lines, args=(proc, lines), daemon=True).start()
        while left:
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:  # the script at the head hangs: stop the interpreter, it counts as timed out
                proc.kill()
                proc.wait()
                done[left[0]] = Ran(left[0], TIMED_OUT, f"(ran over {timeout:g} s)")
                left.pop(0)
                break
            if line is None:  # the interpreter ended before the script at the head did: that script killed it
                code = proc.wait()
                done[left[0]] = Ran(left[0], code or 1, f"(the interpreter ended with {code} while it ran)")
                left.pop(0)
                break
            if MARK not in line:
                continue
            code, _, script = line.rstrip("\n").split(MARK, 1)[1].strip().partition(" ")
            done[script] = Ran(script, int(code), _read(script + ".out"))
            left.remove(script)
        else:
            proc.wait()


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return ""


def run_scripts(scripts: list[str], jobs: int = 1, timeout: float = TIMEOUT) -> dict[str, Ran]:
    """script path -> Ran, for every script (absolute paths), in `jobs` interpreters side by side."""
    groups = [scripts[k::max(1, jobs)] for k in range(max(1, jobs))]
    done: dict[str, Ran] = {}
    threads = [threading.Thread(target=_batch, args=(g, timeout, done)) for g in groups if g]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done
