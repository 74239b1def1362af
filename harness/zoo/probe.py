"""The probe: does each implementation's spec build, run and export? Asked of child processes only.

The parent never imports the library (nor torch): it hands plain dicts to `jobs` spawned children
(probe_worker.serve) and gets plain dicts back, one per (implementation, dtype). A child that does
not answer within `timeout` seconds is killed and its task recorded as a timeout; a child that dies
costs its task one record; either way a fresh child takes the rest. Until the module-case package of
issue 23 lands, this is the zoo's worker-side resolution; its records are meant to merge into it.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import tempfile
import time
from collections import Counter
from multiprocessing.connection import wait

from harness.zoo.catalog import DTYPES, Zoo

DEFAULT_TIMEOUT = 180.0
READY_TIMEOUT = 600.0  # importing torch on a loaded machine


def _failed(task: dict, stage: str, reason: str) -> dict:
    spec = task["spec"]
    return {"id": task["id"], "class": spec["class"], "dtype": spec["dtype"], "status": "failed",
            "stage": stage, "reason": reason, "ops": []}


class _Child:
    def __init__(self, ctx, sys_path: str | None, log: str | None):
        from harness.zoo import probe_worker

        self.log = log
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=probe_worker.serve, args=(child, sys_path, log), daemon=True)
        self.process.start()
        child.close()
        self.task: dict | None = None
        self.since = time.monotonic()
        self.ready = False

    def send(self, task: dict) -> None:
        self.task, self.since = task, time.monotonic()
        self.conn.send(task)

    def last_words(self) -> str:
        """The last line the child wrote to its log (why it died), or ""."""
        try:
            with open(self.log, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - 2000))
                lines = [ln for ln in fh.read().decode("utf-8", "replace").splitlines() if ln.strip()]
            return lines[-1][:200] if lines else ""
        except (OSError, TypeError):
            return ""

    def stop(self) -> None:
        if self.process.is_alive():
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.conn.close()


def run_tasks(tasks: list[dict], jobs: int = 2, timeout: float = DEFAULT_TIMEOUT, sys_path: str | None = None,
              on_record=None) -> list[dict]:
    """Probe every task ({"id", "spec"}) in child processes; one record per task, in task order."""
    ctx = mp.get_context("spawn")
    pending = list(tasks)
    records: dict[str, dict] = {}
    logs = tempfile.mkdtemp(prefix="normdiff-zoo-probe-")
    serial = iter(range(1 << 30))

    def child() -> _Child:
        return _Child(ctx, sys_path, os.path.join(logs, f"child-{next(serial)}.log"))

    children = [child() for _ in range(max(1, min(jobs, len(tasks))))] if tasks else []

    def done(rec: dict) -> None:
        records[rec["id"]] = rec
        if on_record:
            on_record(rec)

    try:
        while len(records) < len(tasks):
            for c in children:
                if c.ready and c.task is None and pending:
                    c.send(pending.pop(0))
            ready = wait([c.conn for c in children], timeout=5.0)
            now = time.monotonic()
            for i, c in enumerate(children):
                if c.conn in ready:
                    try:
                        msg = c.conn.recv()
                    except (EOFError, OSError):
                        c.process.join(5)
                        words = c.last_words()
                        if c.task is not None:
                            done(_failed(c.task, "crash", f"the child died (exit code {c.process.exitcode}) {words}"))
                        elif not c.ready:
                            raise RuntimeError(f"a probe child died before it was ready "
                                               f"(exit code {c.process.exitcode}): {words}") from None
                        children[i] = child()
                        c.stop()
                        continue
                    if msg.get("ready"):
                        c.ready = True
                    else:
                        c.task = None
                        done(msg)
                elif c.task is not None and now - c.since > timeout:
                    done(_failed(c.task, "timeout", f"no answer in {timeout:g} s"))
                    c.process.kill()
                    c.stop()
                    children[i] = child()
                elif not c.ready and now - c.since > READY_TIMEOUT:
                    raise RuntimeError(f"a probe child was not ready in {READY_TIMEOUT:g} s (importing torch)")
    finally:
        for c in children:
            c.stop()
        shutil.rmtree(logs, ignore_errors=True)
    return [records[t["id"]] for t in tasks]


def probe_zoo(zoo: Zoo, dtypes=DTYPES, jobs: int = 2, timeout: float = DEFAULT_TIMEOUT, names=None,
              on_record=None) -> list[dict]:
    """One record per implementation: its entry and, per dtype, the probe's record (plain data, JSON)."""
    entries = [e for e in zoo.entries if names is None or e.name in names]
    tasks = [{"id": f"{e.key}/{d}", "spec": {**e.base, "dtype": d}} for e in entries if e.base for d in dtypes]
    results = {r["id"]: r for r in run_tasks(tasks, jobs=jobs, timeout=timeout, sys_path=zoo.sys_path,
                                             on_record=on_record)}
    out = []
    for e in entries:
        row = {"key": e.key, "representative": e.representative, "members": list(e.members),
               "spec": e.base, "reason": e.reason, "results": {}}
        for d in dtypes:
            r = results.get(f"{e.key}/{d}")
            row["results"][d] = r if r else {"status": "no spec", "stage": "synth", "reason": e.reason, "ops": []}
        out.append(row)
    return out


def summary(rows: list[dict], dtypes=DTYPES) -> dict:
    """Counts per dtype and status, and every failure with its reason."""
    counts = {d: dict(Counter(r["results"][d]["status"] for r in rows)) for d in dtypes}
    failures = [{"class": r["representative"], "dtype": d, "stage": r["results"][d].get("stage", ""),
                 "reason": r["results"][d].get("reason", "")}
                for r in rows for d in dtypes if r["results"][d]["status"] != "exported"]
    return {"implementations": len(rows), "counts": counts, "failures": failures}
