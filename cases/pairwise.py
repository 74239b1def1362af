"""A small deterministic pairwise (2-way covering) generator for the suites.

The full product of a suite's factors is too large to run nightly; a
covering array that holds every *pair* of factor values finds most
interaction bugs (those of one or two factors) at a fraction of the size.
Rows are chosen greedily, as AETG and PICT do: from the valid rows of the
product, the one covering the most pairs not yet covered, the first in
product order on a tie. No randomness and no set-order dependence, so the
same factors give the same rows everywhere.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable


def product(factors: dict[str, list], valid: Callable[[dict], bool] = lambda row: True) -> list[dict]:
    """Every valid row of the full product, in product order (last factor fastest)."""
    names = list(factors)
    rows = (dict(zip(names, values)) for values in itertools.product(*factors.values()))
    return [row for row in rows if valid(row)]


def pairs_of(row: dict[str, Any], factors: dict[str, list]) -> set[tuple]:
    """The (factor, value index, factor, value index) pairs a row holds."""
    names = list(factors)
    idx = [factors[n].index(row[n]) for n in names]
    return {(a, idx[a], b, idx[b]) for a, b in itertools.combinations(range(len(names)), 2)}


def pairwise(factors: dict[str, list], valid: Callable[[dict], bool] = lambda row: True) -> list[dict]:
    """Rows holding every pair of values that some valid row holds (greedy, deterministic)."""
    candidates = product(factors, valid)
    held = [pairs_of(row, factors) for row in candidates]
    uncovered = set().union(*held) if held else set()
    # lazy greedy: a stored gain only ever overestimates, so a popped entry
    # whose recomputed gain is unchanged is the best, and the first on a tie
    heap = [(-len(h), k) for k, h in enumerate(held)]
    heapq.heapify(heap)
    chosen: list[dict] = []
    while uncovered and heap:
        neg, k = heapq.heappop(heap)
        gain = len(held[k] & uncovered)
        if gain == 0:
            continue
        if gain != -neg:
            heapq.heappush(heap, (-gain, k))
            continue
        chosen.append(candidates[k])
        uncovered -= held[k]
    return chosen
