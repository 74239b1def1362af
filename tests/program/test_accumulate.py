"""The float32 accumulation orders: each is the sum or the moments it names, bit for bit."""
import numpy as np
import pytest

from harness.program import accumulate as W

SEQUENTIAL = W.Accumulation("sequential", "sequential")


def test_each_order_is_the_float32_sum_it_names():
    a = np.random.default_rng(0).normal(1000, 1, (3, 1023)).astype(np.float32)
    loop = []
    for row in a:
        s = np.float32(0)
        for v in row:
            s = np.float32(s + v)
        loop.append(s)
    np.testing.assert_array_equal(W.row_sum(a, SEQUENTIAL), loop)
    np.testing.assert_array_equal(W.row_sum(a, W.Accumulation("pairwise")), a.sum(1))
    partial = [np.add.accumulate(c, axis=1, dtype=np.float32)[:, -1] for c in np.array_split(a, W.BLOCKS, axis=1)]
    blocked = partial[0]
    for p in partial[1:]:
        blocked = blocked + p
    np.testing.assert_array_equal(W.row_sum(a, W.Accumulation("b", "blocked")), blocked)


def _welford_loop(row):
    mean, m2 = np.float32(0), np.float32(0)
    for k, v in enumerate(row):
        d = v - mean
        mean = np.float32(mean + d / np.float32(k + 1))
        m2 = np.float32(m2 + d * (v - mean))
    return np.float32(len(row)), mean, m2


def _chan(parts):
    c, mean, m2 = parts[0]
    for k, bm, bm2 in parts[1:]:
        total = c + k
        d = bm - mean
        mean = mean + d * (k / total)
        m2 = m2 + bm2 + d * d * (c * k / total)
        c = total
    return mean, m2


@pytest.mark.parametrize("sums, blocks", [("sequential", 4), ("blocked", 4), ("blocked", 3), ("lanes", 4)])
def test_welford_is_the_textbook_update_one_element_at_a_time(sums, blocks):
    a = np.random.default_rng(1).normal(1000, 1, (2, 1023)).astype(np.float32)
    mean, m2 = W.moments(a, True, W.Accumulation("w", sums, "welford", blocks))
    for r in range(2):
        if sums == "sequential":
            _, want_mean, want_m2 = _welford_loop(a[r])
        elif sums == "lanes":
            want_mean, want_m2 = _chan([_welford_loop(a[r, lane::W.LANES]) for lane in range(W.LANES)])
        else:
            want_mean, want_m2 = _chan([_welford_loop(c) for c in np.array_split(a[r], blocks)])
        assert (mean[r], m2[r]) == (want_mean, want_m2)
    exact = a.astype(np.float64)
    np.testing.assert_allclose(mean, exact.mean(1), rtol=1e-6)
    np.testing.assert_allclose(m2 / 1023, exact.var(1), rtol=1e-3)  # offset 1000: float32 keeps ~1e-4
