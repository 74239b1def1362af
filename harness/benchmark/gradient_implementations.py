"""Correct and deliberately wrong backward implementations of the catalog's norms, each a path that trains.

Every implementation is a `Path` that trains (`trains`): `prepare(spec,
module, example)` receives the case's Backward module (harness.oracle.backward),
reads the forward module's weight and bias, and its `run` takes the inputs then
the cotangent and returns (d_x, d_weight, d_bias), computed in NumPy by one
`GradRecipe` (harness/benchmark/gradient_numerics.py). The correct ones are
correct by construction (float32-accumulating, rounded once, in several
orders); each wrong one is one bug class. `register_all()` puts them in the
path registry, so they run through the real runner and comparator.
"""
from __future__ import annotations

import numpy as np

from harness import paths
from harness.benchmark.gradient_numerics import GradRecipe, Layout, backward
from harness.core.tensors import to_numpy
from harness.paths.base import Path, Prepared, Unsupported

PATTERNS = ("layer_norm", "rms_norm", "group_norm")
PREFIX = "bench-grad-"


class GradImplementation(Path):
    """A NumPy backward from `recipe`; `correct` says whether it is correct by construction."""

    recipe = GradRecipe()
    correct = False
    trains = "a NumPy backward (the gradient benchmark's)"
    packages = ()
    warm_imports = ("torch", "numpy")

    def applies(self, spec) -> str | None:
        """Why the bug class does not apply to `spec`, or None when it does."""
        return None

    def prepare(self, spec, module, example) -> Prepared:
        if not spec.grad or spec.style != "module" or spec.pattern not in PATTERNS:
            raise Unsupported(f"gradient benchmark implementations compute the backward of {', '.join(PATTERNS)}")
        reason = self.applies(spec)
        if reason:
            raise Unsupported(reason)
        forward = module.forward_module
        params = {name.rpartition(".")[2]: to_numpy(p) for name, p in forward.named_parameters()}
        layout = Layout(spec.pattern, spec.eps, spec.groups)
        recipe = self.recipe

        def run(args):
            x, dy = args
            return backward(recipe, layout, x, dy, params.get("weight"), params.get("bias"))

        return Prepared(run, {"implementation": self.name, "correct": self.correct})


def _narrow(spec) -> str | None:
    return "the input dtype is float32: the bug class needs a narrower one" if spec.dtype == "float32" else None


def _inexact_count(spec) -> str | None:
    """A power of two's reciprocal is exact in every dtype: 1/N held in the dtype changes nothing there."""
    n = Layout(spec.pattern, spec.eps, spec.groups).stats_rows(np.empty(spec.shape, np.int8)).shape[1]
    return _narrow(spec) or ("1/N and 2/N are exact for a power of two" if n & (n - 1) == 0 else None)


# -- correct by construction ---------------------------------------------------

class Exact(GradImplementation):
    description = "the backward in float64, each gradient rounded once"
    recipe = GradRecipe(acc="float64")
    correct = True


class TwoPass(GradImplementation):
    description = "float32: two-pass statistics, pairwise sums, each gradient rounded once"
    correct = True


class Sequential(GradImplementation):
    description = "float32: two-pass statistics, every sum added left to right (rows and channels)"
    recipe = GradRecipe(sums="sequential")
    correct = True


class Welford(GradImplementation):
    description = "float32: Welford statistics, pairwise sums"
    recipe = GradRecipe(stats="welford")
    correct = True


class VarPath(GradImplementation):
    description = "float32: d_x through dvar·2/N and dmean·1/N (the decompositions' form), sequential sums"
    recipe = GradRecipe(form="var_path", sums="sequential")
    correct = True


# -- one bug class each ---------------------------------------------------------

class WeightSumInDtype(GradImplementation):
    description = "d_weight and d_bias accumulated row after row in the input dtype"
    recipe = GradRecipe(weight_sum_in_dtype=True)
    applies = staticmethod(_narrow)


class SavedStatsInDtype(GradImplementation):
    description = "the saved mean and rstd rounded to the input dtype"
    recipe = GradRecipe(saved_in_dtype=("mean", "rstd"))
    applies = staticmethod(_narrow)


class RstdInDtype(GradImplementation):
    description = "the saved rstd rounded to the input dtype"
    recipe = GradRecipe(saved_in_dtype=("rstd",))
    applies = staticmethod(_narrow)


class InvNInDtype(GradImplementation):
    description = "1/N held in the input dtype"
    recipe = GradRecipe(inv_n_in_dtype=True)
    applies = staticmethod(_inexact_count)


class TwoNInDtype(GradImplementation):
    description = "the variance path's 2/N (and 1/N) held in the input dtype"
    recipe = GradRecipe(form="var_path", two_n_in_dtype=True, inv_n_in_dtype=True)
    applies = staticmethod(_inexact_count)


class BackwardInDtype(GradImplementation):
    description = "the upcast dropped in the backward only: every backward operation rounded to the input dtype"
    recipe = GradRecipe(backward_in_dtype=True)
    applies = staticmethod(_narrow)


class RowSumsInDtype(GradImplementation):
    description = "d_x's row sums accumulated in the input dtype"
    recipe = GradRecipe(row_sums_in_dtype=True)
    applies = staticmethod(_narrow)


CORRECT = {"exact": Exact, "two-pass": TwoPass, "sequential": Sequential, "welford": Welford, "var-path": VarPath}
WRONG = {"weight-sum-in-dtype": WeightSumInDtype, "saved-stats-in-dtype": SavedStatsInDtype,
         "rstd-in-dtype": RstdInDtype, "inv-n-in-dtype": InvNInDtype, "two-n-in-dtype": TwoNInDtype,
         "backward-in-dtype": BackwardInDtype, "row-sums-in-dtype": RowSumsInDtype}


def register_all() -> dict[str, type]:
    """Register every implementation as a path (bench-grad-NAME); returns path name -> class."""
    names = {}
    for key, cls in {**CORRECT, **WRONG}.items():
        names[PREFIX + key] = cls
        paths.register(PREFIX + key, f"{__name__}:{cls.__name__}")
    return names
