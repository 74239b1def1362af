"""The suites: what they cover, that they are valid and deterministic, and the pairwise generator."""
import itertools
import json

import pytest

from harness.oracle.inputs import BENIGN
from cases.pairwise import pairs_of, pairwise, product
from cases.suites import SEEDS, factors, inputs_for, suite, suite_names
from harness.spec.keys import style_variants as variants
from harness.core.dtypes import DTYPES
from harness.core.records import read_results
from cases import nearmiss
from harness.spec import CASTS, INPUT_KINDS, PATTERNS, STYLES, CaseSpec

FP16_MAX = 65504


def row_len(spec: CaseSpec) -> int:
    """Elements one normalization row holds."""
    if spec.pattern in ("layer_norm", "rms_norm"):
        return spec.shape[-1]
    per_channel = 1
    for d in spec.shape[2:]:
        per_channel *= d
    if spec.pattern == "group_norm":
        return spec.shape[1] // spec.groups * per_channel
    return per_channel if spec.pattern == "instance_norm" else 1


def structure_row(spec: CaseSpec) -> tuple:
    """The structure factors of a spec, as the suites define them."""
    return ((spec.pattern, spec.style, spec.cast), spec.dtype,
            "float32" if spec.weight_dtype != spec.dtype else "same", len(spec.shape), spec.layout,
            spec.affine, spec.params_dict["kind"])


@pytest.fixture(scope="module")
def nightly():
    return suite("nightly")


@pytest.fixture(scope="module")
def full():
    return suite("full")


@pytest.fixture(scope="module")
def smoke():
    return suite("smoke")


def test_suites_are_deterministic_unique_and_start_with_the_seeds():
    for name in ("smoke", "nightly"):
        specs = suite(name)
        assert [s.to_json() for s in specs] == [s.to_json() for s in suite(name)]
        assert len({s.case_id for s in specs}) == len(specs)
        assert [s.to_json() for s in specs[:len(SEEDS)]] == [CaseSpec.from_dict(r).to_json() for r in SEEDS]
    assert suite_names() == ["context", "full", "gradients", "nearmiss", "nightly", "shapes", "smoke", "zoo"]
    with pytest.raises(KeyError, match="known: context, full, gradients, nearmiss, nightly, shapes, smoke, zoo"):
        suite("weekly")


def test_nightly_crosses_every_pattern_style_cast_and_dtype_with_every_input_kind(nightly):
    assert len(nightly) >= 500
    assert {s.pattern for s in nightly} == set(PATTERNS)
    assert {s.style for s in nightly} == set(STYLES)
    assert {s.dtype for s in nightly} == set(DTYPES)
    assert {s.cast for s in nightly} - {None} == set(CASTS)
    assert {s.input_dict["kind"] for s in nightly} == set(INPUT_KINDS)
    assert {s.layout for s in nightly} == {"contiguous", "channels_last"}
    assert {s.affine for s in nightly} == {"none", "weight", "weight_bias"}
    assert {s.params_dict["kind"] for s in nightly} == {"ones", "normal"}
    assert any(s.weight_dtype == "float32" != s.dtype for s in nightly)
    # the full cross: every (pattern, style, cast) × dtype meets every input kind, benign and adversarial
    held = {((s.pattern, s.style, s.cast), s.dtype, s.input_dict["kind"]) for s in nightly}
    for variant, dtype in itertools.product(variants(), DTYPES):
        for kind in INPUT_KINDS:
            assert (variant, dtype, kind) in held, (variant, dtype, kind)
    assert set(BENIGN) < set(INPUT_KINDS)


def test_nightly_holds_every_pair_of_structure_factors_the_full_product_holds(nightly, full):
    def pairs(specs):
        return {(a, ra[a], b, ra[b]) for ra in {structure_row(s) for s in specs}
                for a, b in itertools.combinations(range(len(ra)), 2)}

    missing = pairs(full) - pairs(nightly)
    assert not missing, sorted(missing)[:5]


def test_nightly_is_a_subset_of_full_and_keeps_its_compile_budget(nightly, full):
    ids = {s.case_id for s in full}
    assert {s.case_id for s in nightly} <= ids and len(ids) > 10 * len(nightly)
    # compiles dominate a run, one per structure and path (their cost: docs/measurements.md); the near-miss
    # programs (every entry in float16 and float32) add their own structures on top
    catalog = [s for s in nightly if s.program is None]
    programs = [s for s in nightly if s.program is not None]
    assert len({s.structure_key() for s in catalog}) <= 110
    assert len({s.structure_key() for s in programs}) <= 2 * len(nearmiss.CATALOG) + 1


def test_long_rows_reach_4096_and_one_overflows_a_float16_count(nightly, smoke):
    for specs in (nightly, smoke):
        assert any(row_len(s) > FP16_MAX for s in specs)
    over = {s.pattern for s in nightly if row_len(s) > FP16_MAX}
    assert {"layer_norm", "rms_norm", "group_norm", "instance_norm"} <= over
    assert {s.pattern for s in nightly if row_len(s) >= 4096} >= {"layer_norm", "rms_norm", "group_norm"}


def test_smoke_is_small_and_touches_every_pattern_style_dtype_cast_and_kind(smoke):
    assert 25 <= len(smoke) <= 35
    assert len({s.structure_key() for s in smoke}) <= 18  # under two minutes on every path
    assert {s.pattern for s in smoke} == set(PATTERNS)
    assert {s.style for s in smoke} == set(STYLES)
    assert {s.dtype for s in smoke} == set(DTYPES)
    assert {s.cast for s in smoke} - {None} == set(CASTS)
    assert {s.input_dict["kind"] for s in smoke} == set(INPUT_KINDS)
    assert "channels_last" in {s.layout for s in smoke}
    assert any(s.weight_dtype != s.dtype for s in smoke)


def test_adversarial_offsets_stay_representable_in_their_dtype():
    from harness.oracle.inputs import make_inputs

    for dtype in DTYPES:
        alt = next(i for i in inputs_for(dtype) if i["kind"] == "alternating" and i["offset"])
        spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": dtype, "shape": [1, 64], "input": alt})
        assert len(set(make_inputs(spec).x.astype(float).ravel())) == 2  # ±1 survives the rounding


# -- the pairwise generator --------------------------------------------------

def test_pairwise_covers_every_pair_with_fewer_rows():
    f = {"a": [0, 1, 2], "b": ["x", "y", "z"], "c": [True, False], "d": [1, 2]}
    rows = pairwise(f)
    want = set().union(*(pairs_of(r, f) for r in product(f)))
    assert set().union(*(pairs_of(r, f) for r in rows)) == want
    assert 9 <= len(rows) < len(product(f)) == 36
    assert rows == pairwise(f)  # deterministic


def test_pairwise_respects_constraints():
    f = {"a": [0, 1], "b": [0, 1], "c": [0, 1, 2]}
    valid = lambda r: not (r["a"] == 1 and r["c"] == 2)  # noqa: E731
    rows = pairwise(f, valid)
    assert all(valid(r) for r in rows)
    assert {(r["b"], r["c"]) for r in rows} == {(b, c) for b in (0, 1) for c in (0, 1, 2)}
    assert {(r["a"], r["c"]) for r in rows} == {(a, c) for a in (0, 1) for c in (0, 1, 2)} - {(1, 2)}


def test_factor_values_all_appear_in_some_valid_structure():
    from cases.suites import _valid

    rows = product(factors(), _valid)
    for name, values in factors().items():
        assert {r[name] for r in rows} == set(values), name


# -- the command line ------------------------------------------------------------

def test_cases_command_prints_the_nightly_specs_as_json_lines(cli_here, nightly):
    r = cli_here("cases", "--suite", "nightly")
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.splitlines()
    assert lines == [s.to_json() for s in nightly]  # the same bytes in another process
    assert all(CaseSpec.from_dict(json.loads(line)).to_json() == line for line in lines)


def test_cases_command_with_an_unknown_suite_is_one_line_and_exit_2(cli_here):
    r = cli_here("cases", "--suite", "weekly")
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "unknown suite 'weekly'" in r.stderr


def explains(rec: dict) -> bool:
    """Whether a record's message says why it has its verdict."""
    v, m, ratio = rec["verdict"], rec["message"], rec.get("max_err_over_tol")
    if v == "pass":
        return m.startswith("max abs err") and (ratio <= 1 or "rows over the bound but within" in m
                                                and "of what eager or a correct float32" in m)
    if v == "inaccurate":
        if rec.get("unstable"):
            return m.startswith("unstable pattern: eager exceeds the bound") and ratio > 1
        if "beyond what correct float32 implementations achieve" in m:  # held to the measured accumulation
            return "over 2x eager's" in m and "the float32 witnesses'" in m
        return "over the bound and worse than" in m and ratio > 1
    if v == "dtype_mismatch":
        return m.startswith(f"output dtype {rec['out_dtype']}") and rec["expected_dtype"] in m
    if v == "nonfinite":
        return "non-finite values where the reference is finite" in m
    if v == "shape_mismatch":
        return m.startswith("output shape")
    if v == "error":
        return rec["stage"] in ("export", "compile", "run") and bool(m)
    return v in ("unsupported", "crash", "timeout") and bool(m)


@pytest.mark.xdist_group("smoke_on_eager")  # the session's one run of smoke on eager (conftest.py)
def test_smoke_on_eager_has_every_verdict_explained_by_its_message(smoke_on_eager, smoke):
    out, r = smoke_on_eager
    records = read_results(str(out / "results.jsonl"))
    assert r.returncode == (0 if all(rec["verdict"] == "pass" for rec in records) else 1), r.stderr
    assert sorted(rec["case_id"] for rec in records) == sorted(s.case_id for s in smoke)
    for rec in records:
        assert explains(rec), rec
        if rec["verdict"] != "pass":
            assert rec["unstable"]  # eager over the bound is a pattern finding, never a compiler's


@pytest.mark.slow
def test_smoke_on_a_compiled_path_has_every_verdict_explained(tmp_path, smoke):
    from harness.engine.execute import Executor

    ex = Executor()
    picked = [s for s in smoke if s.pattern in ("batch_norm", "instance_norm") or s.shape == (1, 65536)]
    records = [ex.execute(s, "tvm-decompose") for s in picked]
    assert len(records) >= 6 and ex.misses <= 8  # structures shared: inputs reuse one compile
    for rec in records:
        assert explains(rec), rec


def test_smoke_is_part_of_nightly_so_the_baseline_covers_it(nightly, smoke):
    assert {s.case_id for s in smoke} <= {s.case_id for s in nightly}
