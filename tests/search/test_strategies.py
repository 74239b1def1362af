"""The hypothesis strategies for case specs (harness.search.strategies), in process, without compiling.

Valid by construction (every drawn spec normalises to itself and runs on
eager), every docs/contracts.md §1 dimension reachable, restrictions respected, the
search biased toward adversarial inputs, and shrinking toward a small shape
and the simplest choices.
"""
from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, find, given, seed, settings
from hypothesis import strategies as st

from harness.core.dtypes import DTYPES
from harness.core.verdicts import WRONG_OUTPUT, Verdict
from harness.engine.execute import Executor
from harness.spec import AFFINES, CASTS, CATALOG_STYLES, INPUT_KINDS, PATTERNS, CaseSpec
from harness.search.strategies import (
    ADVERSARIAL_INPUTS, BENIGN_INPUTS, SIMPLE_INPUTS, case_specs, input_specs, resolve_inputs, row_length,
)

QUICK = settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
RAN = {Verdict.PASS} | WRONG_OUTPUT  # eager ran the drawn case (no error, crash or timeout)


@seed(20240601)
@settings(QUICK, max_examples=300)
@given(case_specs())
def test_every_drawn_spec_is_valid_and_normalised(spec):
    assert isinstance(spec, CaseSpec)
    assert CaseSpec.from_dict(spec.to_dict()) == spec
    assert CaseSpec.from_json(spec.to_json()).case_id == spec.case_id
    assert 1 <= math.prod(spec.shape) <= 65536


_EXECUTOR = Executor()


@seed(7)
@settings(QUICK, max_examples=60)
@given(case_specs(max_elements=4096))
def test_eager_runs_every_drawn_spec(spec):
    """Valid means runnable: torch takes every drawn case (no `error` on eager)."""
    record = _EXECUTOR.execute(spec, "eager")
    assert record["verdict"] in RAN, record["message"]


@seed(3)
@settings(QUICK, max_examples=150)
@given(case_specs(patterns=["rms_norm", "group_norm"], dtypes=["bfloat16"], input_kinds=["benign", "tiny"],
                  max_row=64, max_elements=2048))
def test_restrictions_are_respected(spec):
    assert spec.pattern in ("rms_norm", "group_norm")
    assert spec.dtype == "bfloat16"
    assert spec.input_dict["kind"] in ("normal", "uniform", "tiny")
    if spec.input_dict["kind"] == "normal":
        assert spec.input_dict["mean"] == 0.0  # benign: well conditioned
    if spec.pattern == "rms_norm":
        assert spec.shape[-1] <= 64
    assert math.prod(spec.shape) <= 2048


def _reachable():
    """(name, predicate) for every value of every docs/contracts.md §1 dimension."""
    checks = []
    for pattern in PATTERNS:
        checks.append((f"pattern={pattern}", lambda s, v=pattern: s.pattern == v))
    for style in CATALOG_STYLES:
        checks.append((f"style={style}", lambda s, v=style: s.style == v))
    for dtype in DTYPES:
        checks.append((f"dtype={dtype}", lambda s, v=dtype: s.dtype == v))
    checks.append(("weight_dtype=float32 under float16",
                   lambda s: s.dtype == "float16" and s.weight_dtype == "float32"))
    for cast in CASTS:
        checks.append((f"cast={cast}", lambda s, v=cast: s.cast == v))
    checks.append(("layout=channels_last", lambda s: s.layout == "channels_last"))
    for affine in AFFINES:
        checks.append((f"affine={affine}", lambda s, v=affine: s.affine == v))
    checks.append(("eps=0", lambda s: s.eps == 0.0))
    checks.append(("eps=0.1", lambda s: s.eps == 0.1))
    checks.append(("groups>1", lambda s: s.pattern == "group_norm" and s.groups > 1))
    for kind in INPUT_KINDS:
        checks.append((f"input={kind}", lambda s, v=kind: s.input_dict["kind"] == v))
    checks.append(("normal mean=1000", lambda s: s.input_dict == {"kind": "normal", "mean": 1000.0, "std": 1.0}))
    checks.append(("params=normal", lambda s: s.params_dict["kind"] == "normal"))
    checks.append(("seed>0", lambda s: s.seed > 0))
    checks.append(("5-D", lambda s: len(s.shape) == 5))
    checks.append(("row>=4096", lambda s: row_length(s) >= 4096))
    return checks


def test_every_dimension_value_is_reached():
    """One seeded search of 800 examples shows every value of every dimension."""
    checks = _reachable()
    missing = {name for name, _ in checks}

    @seed(2)
    @settings(QUICK, max_examples=800)
    @given(case_specs())
    def search(spec):
        for name, predicate in checks:
            if name in missing and predicate(spec):
                missing.discard(name)

    search()
    assert not missing


def test_shrinks_to_the_smallest_shape_and_simplest_choices():
    """A row-length threshold shrinks to exactly that row, with every other choice at its simplest."""
    want = lambda s: s.pattern == "layer_norm" and s.dtype == "float16" and row_length(s) >= 300  # noqa: E731
    for r in range(2):
        found = find(case_specs(), want, settings=settings(QUICK, max_examples=3000), random=random.Random(r))
        assert found.to_dict() == {
            "pattern": "layer_norm", "style": "module", "dtype": "float16", "weight_dtype": "float16",
            "cast": None, "shape": [300], "layout": "contiguous", "affine": "weight_bias", "eps": 1e-5,
            "groups": 1, "input": {"kind": "normal", "mean": 0.0, "std": 1.0}, "params": {"kind": "ones"},
            "seed": 0,
        }


def test_an_adversarial_kind_shrinks_to_its_default_parameters():
    found = find(case_specs(), lambda s: s.input_dict["kind"] == "offset",
                 settings=settings(QUICK, max_examples=3000), random=random.Random(1))
    assert found.input_dict == {"kind": "offset", "offset": 1000.0, "std": 1.0}
    assert found.shape == (1,)


def test_search_is_biased_toward_adversarial_inputs():
    kinds: Counter = Counter()

    @seed(11)
    @settings(QUICK, max_examples=400)
    @given(case_specs())
    def draw(spec):
        kinds[spec.input_dict["kind"]] += 1

    draw()
    adversarial = sum(kinds[k] for k in ADVERSARIAL_INPUTS)
    assert adversarial > 0.6 * sum(kinds.values()), kinds
    assert set(kinds) == set(INPUT_KINDS), kinds  # yet every kind shows up


@seed(5)
@settings(QUICK, max_examples=100)
@given(input_specs(["all"]))
def test_input_objects_are_valid_spec_inputs(inp):
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [8], "input": inp})
    assert spec.input_dict == inp


def test_input_groups():
    assert resolve_inputs(["benign"]) == {k: True for k in BENIGN_INPUTS}
    assert list(resolve_inputs(["adversarial"])) == [k for k in resolve_inputs(["all"]) if k in ADVERSARIAL_INPUTS]
    assert resolve_inputs(["benign", "normal"])["normal"] is False  # named on its own: full range
    assert set(SIMPLE_INPUTS) <= set(INPUT_KINDS)


@pytest.mark.parametrize("kwargs,message", [
    ({"dtypes": ["float64"]}, "dtypes: unknown value 'float64'"),
    ({"patterns": ["layer_norm"], "styles": ["qwen"]}, "no style of layer_norm among qwen"),
    ({"input_kinds": ["weird"]}, "unknown input kind or group 'weird'"),
    ({"layouts": ["channels_last"]}, "channels_last alone"),
    ({"max_elements": 4}, "max_elements must be >= 16"),
])
def test_bad_restrictions_are_one_line_errors(kwargs, message):
    with pytest.raises(ValueError) as info:
        case_specs(**kwargs)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_strategy_composes_with_user_strategies():
    """Exported for users' own @given tests: it combines like any strategy."""
    pairs = st.tuples(case_specs(dtypes=["float32"]), st.integers(0, 3))

    @settings(QUICK, max_examples=20)
    @given(pairs)
    def check(pair):
        spec, k = pair
        assert spec.dtype == "float32" and 0 <= k <= 3

    check()


def _drawn(strategy, seed_value, n=200):
    from hypothesis import Phase
    from hypothesis.errors import NoSuchExample

    seen = []
    with pytest.raises(NoSuchExample):
        find(strategy, lambda s: seen.append(s) and False,
             settings=settings(QUICK, max_examples=n, phases=[Phase.generate]), random=random.Random(seed_value))
    return seen


def test_gradient_cases_are_drawn_one_time_in_grad_share_deterministically_and_can_be_fixed():
    from harness.search.strategies import GRAD_SHARE, is_grad

    specs = _drawn(case_specs(max_elements=4096), "normdiff-fuzz:1:0")
    assert [s.case_id for s in specs] == [s.case_id for s in _drawn(case_specs(max_elements=4096), "normdiff-fuzz:1:0")]
    share = sum(s.grad for s in specs) / len(specs)
    # hypothesis leans toward a choice's first value (a forward case), so somewhat under 1 / GRAD_SHARE
    assert 0.4 / GRAD_SHARE <= share <= 1.5 / GRAD_SHARE
    # read off the seed, not drawn: the forward cases' choices are those of a search without gradients
    forward = _drawn(case_specs(max_elements=4096, grad=False), "normdiff-fuzz:1:0")
    assert [s.to_dict() for s in specs if not s.grad] == [s.to_dict() for s in forward if not is_grad(s.seed, None)]
    every = _drawn(case_specs(max_elements=4096, grad=True), 3, 60)  # a gradient case of every pattern
    assert all(s.grad for s in every) and {s.pattern for s in every} == set(PATTERNS)
    assert not any(s.grad for s in _drawn(case_specs(max_elements=4096, grad=False), 3, 30))
