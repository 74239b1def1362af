"""A sum over the rows of values linear in a symmetric cotangent, each row reading its own row of it: the rows'
errors add as a random walk (C_SIGNS·√ΣE_r²), not as Σ E_r; everything else keeps its first-order bound."""
import numpy as np

from harness.oracle.cotangent_walk import symmetric, walker
from harness.program import ProgramCase, evaluate, parse

# x's row statistics (mean and rstd, errors of x alone) times the cotangent, summed over the rows: a weight gradient
WEIGHT_GRADIENT = ("h = x.float()\nm = h.mean(1, keepdim=True)\nrs = torch.rsqrt(h.var(1, keepdim=True, correction=0) "
                   "+ 1e-5)\nreturn (dy.float() * ((h - m) * rs)).sum(0)")


def _evaluate(source: str, rows: int, offset: float, walk: bool):
    rng = np.random.default_rng(0)
    arrays = {"x": (rng.normal(size=(rows, 96)) + offset).astype(np.float16),
              "dy": rng.normal(size=(rows, 96)).astype(np.float16)}
    case = ProgramCase("float16", (rows, 96), extra_inputs=("dy",))
    return evaluate(parse(source, inputs=("x", "dy")), case, arrays,
                    walker_class=walker(("dy",)) if walk else None), arrays


def test_only_independent_symmetric_cotangents_make_the_rows_a_random_walk():
    assert symmetric({"kind": "normal", "mean": 0.0, "std": 1.0})
    assert symmetric({"kind": "uniform", "low": -1.0, "high": 1.0})
    assert not symmetric({"kind": "normal", "mean": 1.0, "std": 1.0})  # every row's error could take one sign
    assert not symmetric({"kind": "uniform", "low": 0.0, "high": 1.0})
    assert not symmetric({"kind": "alternating", "amplitude": 1.0, "offset": 0.0})


def test_a_sum_over_the_rows_of_the_statistics_errors_times_the_cotangent_is_a_random_walk():
    """At an offset of 100 the rows' means carry errors of about κ·C_ACC·u32·√96 each; first order adds them over
    4,096 rows as if each took its cotangent's sign, the walk as √(Σ E_r²): about √4096/(C_SIGNS·√(π/2)) ≈ 25x
    less for normal cotangents. The value is the same, and the walk never exceeds the first-order bound."""
    linear, _ = _evaluate(WEIGHT_GRADIENT, 4096, 100.0, walk=False)
    walked, _ = _evaluate(WEIGHT_GRADIENT, 4096, 100.0, walk=True)
    assert np.array_equal(linear.out, walked.out)
    assert (walked.bound <= linear.bound).all()
    assert np.median(linear.bound / walked.bound) > 8
    # the rounding of the output and the accumulation term stay: the walk only replaces the summands' Σe
    assert (walked.bound > 0).all()


def test_the_walk_is_taken_only_over_the_rows_and_only_for_values_linear_in_the_cotangent():
    """A sum over dim 1 (the row's own elements share its statistics' error), a cotangent squared (even in dy), a
    cotangent plus a constant (not odd) and a program without a cotangent keep the first-order bound exactly."""
    for source in ("h = x.float()\nm = h.mean(1, keepdim=True)\nreturn (dy.float() * (h - m)).sum(1)",
                   "h = x.float()\nm = h.mean(1, keepdim=True)\nreturn (dy.float() * dy.float() * (h - m)).sum(0)",
                   "h = x.float()\nm = h.mean(1, keepdim=True)\nreturn ((dy.float() + 1.0) * (h - m)).sum(0)",
                   "h = x.float()\nm = h.mean(1, keepdim=True)\nreturn (h - m).sum(0)"):
        linear, _ = _evaluate(source, 256, 100.0, walk=False)
        walked, _ = _evaluate(source, 256, 100.0, walk=True)
        assert np.array_equal(linear.bound, walked.bound), source


def test_a_view_that_keeps_each_row_whole_keeps_the_walk_and_one_that_mixes_rows_does_not():
    kept = ("h = x.float()\nm = h.mean(1, keepdim=True)\nt = (dy.float() * (h - m)).view(256, 8, 12)\n"
            "return t.sum(0)")
    mixed = ("h = x.float()\nm = h.mean(1, keepdim=True)\nt = (dy.float() * (h - m)).view(128, 192)\n"
             "return t.sum(0)")
    for source, walks in ((kept, True), (mixed, False)):
        linear, _ = _evaluate(source, 256, 100.0, walk=False)
        walked, _ = _evaluate(source, 256, 100.0, walk=True)
        assert (np.median(linear.bound / walked.bound) > 2) == walks, source

