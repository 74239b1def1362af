"""Progress of a run: a tqdm bar on a terminal, else a line every few percent."""
from __future__ import annotations

import os
import sys
import time

from harness.core.verdicts import Verdict


class Progress:
    """A tqdm bar on a terminal (done, failing, rate, time left), else a line every 5 %."""

    def __init__(self, total: int, enabled: bool = True, stream=None, step: int = 5):
        self.total = total
        self.done = 0
        self.failing = 0
        self.start = time.monotonic()
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.bar = None
        self.step = step
        self._next_pct = step
        if self.enabled and _sized_terminal(self.stream):
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="exec", dynamic_ncols=True, file=self.stream)

    def update(self, record: dict) -> None:
        self.done += 1
        if record.get("verdict") != Verdict.PASS:
            self.failing += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.set_postfix(failing=self.failing, refresh=False)
            self.bar.update(1)
            return
        pct = 100 * self.done / self.total
        if pct >= self._next_pct or self.done == self.total:
            elapsed = time.monotonic() - self.start
            rate = self.done / elapsed if elapsed else 0.0
            left = (self.total - self.done) / rate if rate else 0.0
            print(f"normdiff: {self.done}/{self.total} ({pct:.0f}%), {self.failing} failing, "
                  f"{rate:.2f} exec/s, ~{left:.0f} s left", file=self.stream, flush=True)
            while self._next_pct <= pct:
                self._next_pct += self.step

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _sized_terminal(stream) -> bool:
    """Whether `stream` is a terminal with a size (a pseudo-terminal without one shows no tqdm bar)."""
    try:
        return stream.isatty() and min(os.get_terminal_size(stream.fileno())) > 0
    except (AttributeError, OSError, ValueError):
        return False
