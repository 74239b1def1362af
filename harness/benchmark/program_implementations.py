"""Correct and wrong renderings of program cases, each a path through the public plug-in face.

As harness.benchmark.implementations does for the catalog's modules, every
implementation here is a `Path` whose `prepare(spec, module, example)` reads
the program and its parameters from the case's module and computes the
program in NumPy by one `Rendering` (harness.benchmark.renderings). The
correct ones are correct by construction (FP64 rounded once; the program in
its own dtypes with float32 sums in any order, the witnesses' and three
orders the witnesses never use; a value-preserving rewrite from the
near-miss catalog's legitimate variants); each wrong one is one way a
rewrite or a lowering breaks a norm.

A program case's module is the program's own (harness.program.ProgramModule).
A module case (docs/contracts.md §8) is rendered from its lifted program, as its
reference is: `program_of` is the one place that says where a case's program
comes from.

An implementation raises `Unsupported` where its bug class does not apply:
the rewrite finds no site in the program, or the case has no dtype for the
bug to live in.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from harness import paths
from harness.benchmark import renderings, rewrites
from harness.benchmark.renderings import Rendering, render
from harness.core.dtypes import cast
from harness.core.tensors import to_numpy
from harness.paths.base import Path, Prepared, Unsupported, example_args
from harness.program.ir import Call, Cat, Neg, Norm, Program, ProgramCase, Reduce
from harness.program.accumulate import BLOCKS, LANES, Accumulation

PREFIX = "bench-program-"
# The last output of each implementation by its inputs' bytes: the benchmark reads every output twice
# (the runner's record, then the array for the anchors), and a rendering is deterministic.
MEMO_SIZE = 64
_LAST: dict = {}


def _digest(arrays: dict) -> str:
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{a.dtype}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class Source:
    """What a rendering computes from: the program, its case, its parameters, and its input names in the
    order a path's run() receives the arrays."""

    program: Program
    case: ProgramCase
    params: dict
    names: tuple[str, ...]


_MODULE_CASES: list = []  # this process's harness.engine.cases.Cases, for module cases (made on first use)


def program_of(spec, module) -> Source:
    """Where a case's program comes from: a program case's module (harness.program.ProgramModule) holds it;
    a module case's is its lifted program (harness.engine.cases resolves it, once per structure)."""
    program, case = getattr(module, "program", None), getattr(module, "case", None)
    if isinstance(program, Program) and isinstance(case, ProgramCase):
        return Source(program, case, {n: to_numpy(getattr(module, n)) for n in program.params}, case.inputs)
    if getattr(spec, "is_module", False):
        from harness.engine.cases import Cases

        if not _MODULE_CASES:
            _MODULE_CASES.append(Cases())
        mc = _MODULE_CASES[0].module_case(spec)
        by_forward = {fwd: prog for prog, fwd in mc.resolved.inputs}
        names = ("x",) + tuple(by_forward[f] for f in mc.resolved.called[1:])
        params = {k: v for k, v in mc.param_arrays().items() if k in mc.program.params}
        return Source(mc.program, mc.case, params, names)
    raise Unsupported("program renderings compute program cases (and module cases through their lifted program)")


def _has(program: Program, predicate) -> bool:
    found = []
    for stmt in program.statements:
        rewrites.transform(stmt.value, lambda n: found.append(n) if predicate(n) else None)
    return bool(found)


def _has_norm(program, kinds=("layer_norm", "rms_norm", "group_norm")) -> bool:
    return _has(program, lambda n: isinstance(n, Norm) and n.kind in kinds)


def _has_var(program) -> bool:
    return _has(program, lambda n: isinstance(n, Reduce) and n.op == "var")


class ProgramImplementation(Path):
    """A NumPy rendering of a program case; `correct` says whether it is correct by construction."""

    rendering = Rendering()
    correct = False
    site = ""            # what the rewrite looks for, for the Unsupported message
    also_norms = ()      # F.* kinds the rendering's knobs change where the rewrite finds no site
    packages = ()
    warm_imports = ("torch", "numpy")

    def applies(self, spec, program: Program, case: ProgramCase) -> str | None:
        """Why the bug class does not apply to the case, or None when it does."""
        return None

    def prepare(self, spec, module, example) -> Prepared:
        source = program_of(spec, module)
        program, case = source.program, source.case
        reason = self.applies(spec, program, case)
        if reason:
            raise Unsupported(reason)
        r = self.rendering
        _, sites = renderings.prepare(program, case, r)
        if sites == 0 and not (self.also_norms and (_has_norm(program, self.also_norms) or _has_var(program))):
            raise Unsupported(f"the program has no {self.site}")
        params, names = source.params, source.names
        memo_key = (self.name, program.source, case)

        def run(x):
            xs = x if isinstance(x, tuple) else (x,)
            arrays = {**dict(zip(names, xs)), **params}
            digest = _digest(arrays)
            last = _LAST.get(memo_key)
            if last is None or last[0] != digest:
                last = _LAST[memo_key] = (digest, render(program, case, arrays, r))
                while len(_LAST) > MEMO_SIZE:
                    _LAST.pop(next(iter(_LAST)))
            return last[1].copy()

        try:  # a rewrite that leaves no well-formed program (a reduction's shape changed) is not this case's bug
            run(tuple(to_numpy(t) for t in example_args(example)))
        except (ValueError, IndexError) as exc:
            raise Unsupported(f"the rendering does not compute on this program: {exc}") from None
        return Prepared(run, {"implementation": self.name, "correct": self.correct})


def _narrow_input(spec, program, case) -> str | None:
    return "the input dtype is float32: the bug class needs a narrower one" if case.dtype == "float32" else None


def _make(name: str, description: str, rendering: Rendering, correct: bool = False, site: str = "",
          applies=None, also_norms=()) -> type:
    attrs = {"description": description, "rendering": rendering, "correct": correct, "site": site,
             "also_norms": also_norms, "__doc__": description}
    if applies is not None:
        attrs["applies"] = staticmethod(applies)
    return type(name, (ProgramImplementation,), attrs)


def _acc(name, sums, moments="two_pass", blocks=BLOCKS) -> Rendering:
    return Rendering(acc=Accumulation(name, sums, moments, blocks))


# -- correct by construction ---------------------------------------------------
CORRECT = {
    "exact": _make("Exact", "FP64 from the inputs, rounded once to the output dtype", Rendering(exact=True), True),
    "exact-ulp-up": _make("ExactUlpUp", "the correctly rounded result moved one ULP up",
                          Rendering(exact=True, ulp_step=1), True),
    "exact-ulp-down": _make("ExactUlpDown", "the correctly rounded result moved one ULP down",
                            Rendering(exact=True, ulp_step=-1), True),
    "pairwise": _make("Pairwise", "the program in its dtypes, float32 pairwise sums, two-pass variances",
                      _acc("pairwise", "pairwise"), True),
    "sequential": _make("Sequential", "the program in its dtypes, float32 sums left to right (TVM's loop)",
                        _acc("sequential", "sequential"), True),
    "welford": _make("Welford", "the program in its dtypes, variances, F.* and written-out statistics by float32 Welford",
                     _acc("welford", "sequential", "welford"), True),
    "blocked": _make("Blocked", f"float32 sums over {BLOCKS} contiguous blocks, then across them",
                     _acc("blocked", "blocked"), True),
    "blocked-welford": _make("BlockedWelford", f"Welford on {BLOCKS} contiguous blocks, combined by Chan's update",
                             _acc("blocked welford", "blocked", "welford"), True),
    "lanes-welford": _make("LanesWelford", f"Welford in {LANES} interleaved lanes, combined by Chan's update "
                           "(ATen's vectorized moments)", _acc("lanes welford", "lanes", "welford"), True),
    # held out: orders the comparator's witnesses never compute
    "lanes": _make("Lanes", f"float32 sums in {LANES} interleaved lanes, then across them (a SIMD kernel)",
                   _acc("lanes", "lanes"), True),
    "welford-3-blocks": _make("WelfordThreeBlocks", "Welford on 3 contiguous blocks, combined by Chan's update",
                              _acc("3-block welford", "blocked", "welford", 3), True),
    # the near-miss catalog's legitimate variants, applied as rewrites
    "rewrite-one-over-sqrt": _make("OneOverSqrt", "rsqrt as 1 / sqrt", Rendering(rewrite="rsqrt_as_reciprocal_sqrt"),
                                   True, "rsqrt"),
    "rewrite-divide-by-sqrt": _make("DivideBySqrt", "a multiply by rsqrt as a division by sqrt",
                                    Rendering(rewrite="multiply_as_divide"), True, "multiply by rsqrt"),
}


def _count_inexact(spec, program, case):
    n = case.shape[-1]
    if case.dtype == "float32" or float(cast(np.array(float(n)), case.dtype)) == n:
        return f"{n} is exact in {case.dtype}"
    return None


def _subnormal_input(spec, program, case):
    kinds = {spec.input_dict["kind"]} | {v["kind"] for v in spec.inputs_dict.values()}
    return None if kinds & {"subnormal", "tiny"} else "no input kind that draws subnormals"


def _float32_model(spec, program, case):
    return None if case.dtype == "float32" else "a float16 intermediate is the model's own dtype"


def _float32_weight(spec, program, case):
    return None if "w" in program.params and case.weight_dtype == "float32" and case.dtype != "float32" \
        else "no float32 weight under a narrower input"


def _calls(*names, narrow=False, float32=False):
    """Applies where the program has a call of one of `names`, in a float16/bfloat16 case
    (`narrow`: the bug lives in the input dtype) or a float32 one (`float32`: the forms differ by less than a
    float16 ULP)."""
    def applies(spec, program, case):
        if narrow and case.dtype == "float32":
            return "the input dtype is float32: the bug class needs a narrower one"
        if float32 and case.dtype != "float32":
            return f"the bug changes the value by less than a {case.dtype} ULP"
        if not _has(program, lambda n: isinstance(n, Call) and n.op in names):
            return f"the program has no {'/'.join(names)}"
        return None
    return applies


def _rotary(spec, program, case):
    found = _has(program, lambda n: isinstance(n, Cat) and len(n.tensors) == 2 and isinstance(n.tensors[0], Neg))
    return None if found else "the program has no rotate_half (cat of a negated half and the other)"


# -- one bug class each ---------------------------------------------------------
WRONG = {
    "stats-in-input-dtype": _make("StatsInInputDtype", "every reduction added left to right in the input dtype",
                                  Rendering(stats_in_input=True), applies=_narrow_input),
    "cast-back-dropped": _make("CastBackDropped", "the narrowing casts dropped: the float32 result returned",
                               Rendering(drop_cast_back=True, keep_dtype=False), applies=_narrow_input),
    "upcast-dropped": _make("UpcastDropped", "the upcasts dropped: the norm computed in the input dtype",
                            Rendering(drop_upcast=True), applies=_narrow_input),
    "cast-back-early": _make("CastBackEarly", "the cast back moved onto the operands of the op it wraps",
                             Rendering(cast_back_early=True), applies=_narrow_input),
    "weight-before-cast": _make("WeightBeforeCast", "the weight applied before the cast back, not after",
                                Rendering(rewrite="weight_before_cast", keep_dtype=False), site="weight after a cast"),
    "eps-moved": _make("EpsMoved", "eps moved across the square root",
                       Rendering(rewrite="eps_moved", norm_eps="outside"), site="eps under a root",
                       also_norms=("layer_norm", "rms_norm", "group_norm")),
    "eps-dropped": _make("EpsDropped", "eps dropped", Rendering(rewrite="eps_dropped"), site="eps"),
    "wrong-dims": _make("WrongDims", "the statistics taken over the dim before the normalized one",
                        Rendering(wrong_dims=True)),
    "scaled-swapped": _make("ScaledSwapped", "the scaled tensor swapped for the one the statistic squares",
                            Rendering(rewrite="scaled_swapped"), site="scaled tensor other than the squared one"),
    "one-pass-variance": _make("OnePassVariance", "the one-pass variance E[x^2] - E[x]^2 in float32",
                               Rendering(rewrite="one_pass_variance", one_pass=True), site="centered variance",
                               also_norms=("layer_norm", "group_norm")),
    "unbiased-variance": _make("UnbiasedVariance", "the statistic divided by n - 1",
                               Rendering(rewrite="mean_square_unbiased", unbiased=True), site="mean of squares",
                               also_norms=("layer_norm", "rms_norm", "group_norm")),
    "approx-rsqrt": _make("ApproxRsqrt", "rsqrt and sqrt with relative error 2^-12 (an estimate without Newton step)",
                          Rendering(rsqrt_rel_error=2.0 ** -12)),
    "weight-dropped": _make("WeightDropped", "the weight never applied", Rendering(rewrite="weight_dropped"),
                            site="weight"),
    "bias-dropped": _make("BiasDropped", "the bias never added", Rendering(rewrite="bias_dropped"), site="bias"),
    "count-in-input-dtype": _make("CountInInputDtype", "a mean's element count held in the input dtype",
                                  Rendering(count_in_input=True), applies=_count_inexact),
    "float16-intermediate": _make("Float16Intermediate", "the scaled tensor held in float16 in a float32 model",
                                  Rendering(rewrite="scaled_through_float16", centered_through="float16"),
                                  site="scaled tensor", applies=_float32_model,
                                  also_norms=("layer_norm", "rms_norm", "group_norm")),
    "subnormals-flushed": _make("SubnormalsFlushed", "subnormal inputs and outputs flushed to zero (FTZ/DAZ)",
                                Rendering(flush_subnormals=True), applies=_subnormal_input),
    "weight-through-bfloat16": _make("WeightThroughBfloat16", "a float32 weight rounded to bfloat16",
                                     Rendering(weight_through="bfloat16"), applies=_float32_weight),
    # the ops around a norm
    "matmul-in-input-dtype": _make("MatmulInInputDtype", "a matmul's products and sums in the input dtype",
                                   Rendering(matmul_in_input=True), applies=_calls("matmul", narrow=True)),
    "softmax-unshifted": _make("SoftmaxUnshifted", "softmax without the max shift, in the input dtype",
                               Rendering(softmax_unshifted=True), applies=_calls("softmax", narrow=True)),
    "cumsum-in-input-dtype": _make("CumsumInInputDtype", "a cumsum's running sum in the input dtype",
                                   Rendering(cumsum_in_input=True), applies=_calls("cumsum", narrow=True)),
    "gelu-forms-swapped": _make("GeluFormsSwapped", "gelu's erf and tanh forms swapped",
                                Rendering(gelu_swapped=True), applies=_calls("gelu", float32=True)),
    "rotate-sign-swapped": _make("RotateSignSwapped", "rotate_half negating the other half",
                                 Rendering(rotate_sign_swapped=True), applies=_rotary),
    "nearest-rounded": _make("NearestRounded", "nearest interpolation's source index rounded, not floored",
                             Rendering(nearest_rounded=True), applies=_calls("interpolate")),
}


def register_all() -> dict[str, type]:
    """Register every program implementation as a path (bench-program-NAME); returns path name -> class."""
    names = {}
    for key, cls in {**CORRECT, **WRONG}.items():
        names[PREFIX + key] = cls
        paths.register(PREFIX + key, f"{__name__}:{cls.__name__}")
    return names


for _cls in {**CORRECT, **WRONG}.values():  # importable by name, as NORMDIFF_EXTRA_PATHS names them
    globals()[_cls.__name__] = _cls
