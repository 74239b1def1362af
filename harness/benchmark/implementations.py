"""Correct and deliberately wrong norm implementations, each a path through the public plug-in face.

Every implementation is a `Path` (`prepare(spec, module, example) ->
Prepared`) that reads the module's weight and bias and computes the norm from
the input in NumPy by one `Recipe`. The correct ones are correct by
construction; each wrong one is one bug class, the kind compilers and kernels
have shipped. `register_all()` puts them in the path registry (in this
process and, through NORMDIFF_EXTRA_PATHS, in workers), so they run through
the real runner and comparator like any compiler.

An implementation raises `Unsupported` where its bug class does not apply
(a count held in float32 is exact; a float16 intermediate means nothing in a
float16 model); those cases are not part of the benchmark.
"""
from __future__ import annotations

from harness import paths
from harness.benchmark.numerics import Recipe, normalize, rows_of
from harness.core.tensors import to_numpy
from harness.oracle.reference import expected_dtypes
from harness.paths.base import Path, Prepared, Unsupported

PATTERNS = ("layer_norm", "rms_norm", "group_norm", "instance_norm")
PREFIX = "bench-"


class Implementation(Path):
    """A NumPy norm from `recipe`; `correct` says whether it is correct by construction."""

    recipe = Recipe()
    correct = False
    packages = ()  # numpy and torch: every record carries their versions already
    warm_imports = ("torch", "numpy")

    def applies(self, spec) -> str | None:
        """Why the bug class does not apply to `spec`, or None when it does."""
        return None

    def recipe_for(self, spec) -> Recipe:
        return self.recipe

    def prepare(self, spec, module, example) -> Prepared:
        if spec.style != "module" or spec.pattern not in PATTERNS:
            raise Unsupported(f"benchmark implementations compute the torch.nn {', '.join(PATTERNS)} modules")
        reason = self.applies(spec)
        if reason:
            raise Unsupported(reason)
        weight = getattr(module, "weight", None)
        bias = getattr(module, "bias", None)
        weight = None if weight is None else to_numpy(weight)
        bias = None if bias is None else to_numpy(bias)
        out_dtype = expected_dtypes(spec)[0]
        recipe = self.recipe_for(spec)

        def run(x):
            rows = rows_of(spec, x, weight, bias, wrong_axis=recipe.wrong_axis)
            return normalize(recipe, rows, out_dtype)

        return Prepared(run, {"implementation": self.name, "correct": self.correct})


def _narrow_input(spec) -> str | None:
    return "the input dtype is float32: the bug class needs a narrower one" if spec.dtype == "float32" else None


# -- correct by construction ---------------------------------------------------

class Exact(Implementation):
    """The FP64 result, correctly rounded to the output dtype."""
    description = "FP64 from the input, rounded once to the output dtype"
    recipe = Recipe(stats="exact")
    correct = True


class ExactUlpUp(Exact):
    description = "the correctly rounded result moved one ULP up (nextafter toward +inf)"
    recipe = Recipe(stats="exact", ulp_step=1)


class ExactUlpDown(Exact):
    description = "the correctly rounded result moved one ULP down (nextafter toward -inf)"
    recipe = Recipe(stats="exact", ulp_step=-1)


class TwoPass(Implementation):
    description = "float32 two-pass: the mean, then the mean of squared deviations (pairwise sums)"
    recipe = Recipe()
    correct = True


class Welford(Implementation):
    description = "float32 Welford, one element at a time"
    recipe = Recipe(stats="welford")
    correct = True


class TwoPassSequential(Implementation):
    description = "float32 two-pass, each sum added left to right (a scalar loop, as TVM lowers a reduction)"
    recipe = Recipe(stats="sequential")
    correct = True


class TwoPassLanes(Implementation):
    description = "float32 two-pass, each sum in 8 interleaved lanes then across them (a SIMD kernel)"
    recipe = Recipe(stats="lanes")
    correct = True


class WelfordBlocks(Implementation):
    description = "float32 Welford on 4 contiguous blocks, combined by Chan's update (a parallel reduction)"
    recipe = Recipe(stats="welford_blocks")
    correct = True


# -- one bug class each ---------------------------------------------------------

class StatsInInputDtype(Implementation):
    description = "mean and variance summed one element at a time in the input dtype"
    recipe = Recipe(stats="input_dtype")
    applies = staticmethod(_narrow_input)


class OnePassVariance(Implementation):
    description = "the one-pass variance E[x^2] - E[x]^2 in float32"
    recipe = Recipe(stats="one_pass")

    def applies(self, spec):
        return "rms_norm subtracts no mean" if spec.pattern == "rms_norm" else None


class LostCastBack(Implementation):
    description = "the float32 result returned without the cast back to the input dtype"
    recipe = Recipe(out_dtype="float32")
    applies = staticmethod(_narrow_input)


class EpsOutsideSqrt(Implementation):
    description = "1/(sqrt(var) + eps) instead of 1/sqrt(var + eps)"
    recipe = Recipe(eps="outside")


class EpsDropped(Implementation):
    description = "1/sqrt(var): eps dropped"
    recipe = Recipe(eps="dropped")


class UnbiasedVariance(Implementation):
    description = "the unbiased variance (divides by n - 1)"
    recipe = Recipe(unbiased=True)


class WeightDropped(Implementation):
    description = "the weight never applied"
    recipe = Recipe(use_weight=False)

    def applies(self, spec):
        return "the norm has no weight" if spec.affine == "none" else None


class BiasDropped(Implementation):
    description = "the bias never added"
    recipe = Recipe(use_bias=False)

    def applies(self, spec):
        return "the norm has no bias" if spec.affine != "weight_bias" else None


class SubnormalsFlushed(Implementation):
    description = "subnormal inputs and outputs flushed to zero (FTZ/DAZ)"
    recipe = Recipe(flush_subnormals=True)


class ApproxRsqrt(Implementation):
    description = "an approximate rsqrt with relative error 2^-12 (a hardware estimate without Newton step)"
    recipe = Recipe(rsqrt_rel_error=2.0**-12)


class CountInInputDtype(Implementation):
    description = "the element count n held in the input dtype (inf past 65,504 in float16)"
    applies = staticmethod(_narrow_input)

    def recipe_for(self, spec):
        return Recipe(count_dtype=spec.dtype)


class Float16Intermediate(Implementation):
    description = "x - mean held in a float16 buffer inside a float32 model"
    recipe = Recipe(centered_dtype="float16")

    def applies(self, spec):
        return None if spec.dtype == "float32" else "a float16 intermediate is the model's own dtype"


class WeightThroughBfloat16(Implementation):
    description = "a float32 weight rounded to bfloat16"
    recipe = Recipe(weight_through="bfloat16")

    def applies(self, spec):
        if spec.affine == "none" or spec.weight_dtype != "float32":
            return "no float32 weight"
        return None


class WrongAxis(Implementation):
    description = "the statistics reduced along the wrong axis"
    recipe = Recipe(wrong_axis=True)


# registry name (after PREFIX) -> implementation
CORRECT = {
    "exact": Exact, "exact-ulp-up": ExactUlpUp, "exact-ulp-down": ExactUlpDown,
    "two-pass": TwoPass, "welford": Welford, "two-pass-sequential": TwoPassSequential,
    "two-pass-lanes": TwoPassLanes, "welford-blocks": WelfordBlocks,
}
WRONG = {
    "stats-in-input-dtype": StatsInInputDtype, "one-pass-variance": OnePassVariance,
    "lost-cast-back": LostCastBack, "eps-outside-sqrt": EpsOutsideSqrt, "eps-dropped": EpsDropped,
    "unbiased-variance": UnbiasedVariance, "weight-dropped": WeightDropped, "bias-dropped": BiasDropped,
    "subnormals-flushed": SubnormalsFlushed, "approx-rsqrt": ApproxRsqrt,
    "count-in-input-dtype": CountInInputDtype, "float16-intermediate": Float16Intermediate,
    "weight-through-bfloat16": WeightThroughBfloat16, "wrong-axis": WrongAxis,
}


def register_all() -> dict[str, type]:
    """Register every implementation as a path (bench-NAME); returns path name -> class."""
    names = {}
    for key, cls in {**CORRECT, **WRONG}.items():
        names[PREFIX + key] = cls
        paths.register(PREFIX + key, f"{__name__}:{cls.__name__}")
    return names
