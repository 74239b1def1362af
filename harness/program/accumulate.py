"""How a correct implementation may accumulate a reduction in float32: the orders the program witnesses use.

sequential (left to right), pairwise (NumPy's tree), blocked (BLOCKS
contiguous blocks, then across them), lanes (LANES interleaved partial sums,
a SIMD kernel's: the program witnesses take it only for Welford moments, ATen's vectorized ones), and, for
a variance, two-pass or Welford (blocked and lanes: Welford per group, walked
side by side, combined by Chan et al.'s update). Everything is NumPy in the
array's own dtype, vectorised over the leading axes, reducing the last.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BLOCKS = 4          # the blocked order's contiguous blocks (a 4-thread parallel reduction)
LANES = 8           # a SIMD kernel's interleaved partial sums (ATen's vectorized Welford; lanes two-pass is held out)
SUMS = ("sequential", "pairwise", "blocked", "lanes")
MOMENTS = ("two_pass", "welford")


@dataclass(frozen=True)
class Accumulation:
    """One order of accumulation: how sums are added, and how a variance's moments are formed."""

    name: str
    sums: str = "pairwise"      # one of SUMS
    moments: str = "two_pass"   # one of MOMENTS (only var and the F.* norms take moments)
    blocks: int = BLOCKS

    def __post_init__(self):
        if self.sums not in SUMS or self.moments not in MOMENTS:
            raise ValueError(f"Accumulation {self.name!r}: sums {self.sums!r}, moments {self.moments!r}")



# ------------------------------------------------------------------ float32 sums over the last axis
def _sequential(a: np.ndarray) -> np.ndarray:
    return np.add.accumulate(a, axis=-1, dtype=a.dtype)[..., -1]


def _pairwise(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).sum(-1, dtype=a.dtype)


def _chunks(a: np.ndarray, blocks: int) -> list[np.ndarray]:
    return [c for c in np.array_split(a, min(blocks, a.shape[-1]), axis=-1) if c.shape[-1]]


def _blocked(a: np.ndarray, blocks: int) -> np.ndarray:
    return _sequential(np.stack([_sequential(c) for c in _chunks(a, blocks)], axis=-1))


def _lanes(a: np.ndarray) -> np.ndarray:
    n = a.shape[-1]
    padded = np.zeros(a.shape[:-1] + (-(-n // LANES) * LANES,), a.dtype)
    padded[..., :n] = a
    lanes = np.add.accumulate(padded.reshape(a.shape[:-1] + (-1, LANES)), axis=-2, dtype=a.dtype)[..., -1, :]
    return _sequential(lanes)


def row_sum(a: np.ndarray, acc: Accumulation) -> np.ndarray:
    """The sum over the last axis of `a`, in a's dtype, in the order `acc` says."""
    if acc.sums == "sequential":
        return _sequential(a)
    if acc.sums == "blocked":
        return _blocked(a, acc.blocks)
    if acc.sums == "lanes":
        return _lanes(a)
    return _pairwise(a)


# --------------------------------------------------------------------------- moments over the last axis
def _welford(a: np.ndarray, centered: bool, lengths: np.ndarray | None = None):
    """(count, mean, M2) over the last axis, one element at a time; for centered=False the running mean of
    squares (M2 unused). `lengths` (broadcast over a.shape[:-1]) stops a row's updates after its own
    length, so blocks of unequal length are walked side by side."""
    f = a.dtype.type
    mean = np.zeros(a.shape[:-1], a.dtype)
    m2 = np.zeros(a.shape[:-1], a.dtype)
    for k in range(a.shape[-1]):
        v = a[..., k] if centered else a[..., k] * a[..., k]
        delta = v - mean
        new_mean = mean + delta / f(k + 1)
        new_m2 = m2 + delta * (v - new_mean) if centered else m2
        if lengths is not None:
            live = k < lengths
            new_mean, new_m2 = np.where(live, new_mean, mean), np.where(live, new_m2, m2)
        mean, m2 = new_mean, new_m2
    count = f(a.shape[-1]) if lengths is None else np.broadcast_to(lengths, mean.shape).astype(a.dtype)
    return count, mean, m2


def _chan(count, mean, m2):
    """Chan et al.'s combination, in order, of partial moments along the last axis of (count, mean, M2)."""
    c, mu, s = count[..., 0], mean[..., 0], m2[..., 0]
    for j in range(1, mean.shape[-1]):
        k, bm, bm2 = count[..., j], mean[..., j], m2[..., j]
        total = c + k
        delta = bm - mu
        mu = mu + delta * (k / total)
        s = s + bm2 + delta * delta * (c * k / total)
        c = total
    return c, mu, s


def _grouped(a: np.ndarray, centered: bool, groups: str, blocks: int):
    """Welford per group (BLOCKS contiguous blocks, or LANES interleaved lanes) walked side by side, then Chan."""
    n = a.shape[-1]
    if groups == "lanes":
        g = min(LANES, n)
        length = -(-n // g)
        padded = np.zeros(a.shape[:-1] + (length * g,), a.dtype)
        padded[..., :n] = a
        parts = np.swapaxes(padded.reshape(a.shape[:-1] + (length, g)), -1, -2)  # (..., lane, k)
        lengths = np.array([len(range(lane, n, g)) for lane in range(g)])
    else:
        chunks = _chunks(a, blocks)
        length = max(c.shape[-1] for c in chunks)
        parts = np.stack([np.pad(c, [(0, 0)] * (a.ndim - 1) + [(0, length - c.shape[-1])]) for c in chunks], -2)
        lengths = np.array([c.shape[-1] for c in chunks])
    count, mean, m2 = _welford(parts, centered, lengths)
    return _chan(count, mean, m2)


def moments(a: np.ndarray, centered: bool, acc: Accumulation) -> tuple[np.ndarray, np.ndarray]:
    """(mean, M2 = the sum of squared deviations) over the last axis, in a's dtype, by `acc`;
    for centered=False (rms_norm) (0, the mean of squares)."""
    f = a.dtype.type
    n = f(a.shape[-1])
    if acc.moments == "welford":
        if acc.sums in ("blocked", "lanes"):
            _, mean, m2 = _grouped(a, centered, acc.sums, acc.blocks)
        else:
            _, mean, m2 = _welford(a, centered)
        # uncentered: the running mean of squares is the statistic (the combinations' M2 is unused)
        return (mean, m2) if centered else (np.zeros_like(mean), mean)
    if not centered:
        return np.zeros(a.shape[:-1], a.dtype), row_sum(a * a, acc) / n
    mean = row_sum(a, acc) / n
    d = a - mean[..., None]
    return mean, row_sum(d * d, acc)
