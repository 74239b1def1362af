"""The float32 witnesses: what correct implementations' accumulation achieves on a case's own rows."""
import numpy as np

from harness.spec import CaseSpec
from harness.oracle import compare, witness_error
from harness.oracle.inputs import make_inputs
from harness.oracle.reference import reference


def _case(**raw):
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 4096], **raw})
    ref = reference(spec, make_inputs(spec))
    shape = ref.stats_rows.shape
    units = witness_error.accumulation_units(ref.stats_rows, ref.z.reshape(shape), ref.kappa.reshape(shape),
                                       ref.centered, ref.eps)
    return ref, units, compare._terms(ref, ref.rounding_dtype)[2]


def test_on_a_benign_row_the_witnesses_stay_inside_the_random_walk_estimate():
    ref, units, acc = _case()
    assert units.shape == (2,) and (units > 0).all()  # float32 arithmetic does round
    assert (units < acc).all()


def test_on_a_row_of_repeated_values_sequential_rounding_adds_up_past_the_estimate():
    # bfloat16 values near 1000 take three levels (996, 1000, 1004): the running mean's
    # updates repeat and their rounding errors add coherently instead of as a random walk
    ref, units, acc = _case(dtype="bfloat16", input={"kind": "offset", "offset": 1000, "std": 1}, seed=3)
    assert units[0] > acc


def test_each_algorithm_gives_float32_statistics_close_to_the_exact_ones():
    spec = CaseSpec.from_dict({"pattern": "rms_norm", "dtype": "float16", "shape": [3, 1023]})
    x = make_inputs(spec).x.astype(np.float64).reshape(3, 1023)
    exact = (x * x).mean(1)
    stats = witness_error.statistics(x, centered=False)
    assert len(stats) == len(witness_error.ALGORITHMS)
    for mean, var in stats:
        assert mean.dtype == var.dtype == np.float32
        assert (mean == 0).all()  # rms_norm subtracts no mean
        np.testing.assert_allclose(var, exact, rtol=1e-5)


def test_no_witness_where_no_statistics_are_accumulated():
    spec = CaseSpec.from_dict({"pattern": "batch_norm", "dtype": "float32", "shape": [2, 3, 4],
                               "params": {"kind": "normal"}})
    assert reference(spec, make_inputs(spec)).stats_rows is None


def test_a_programs_witnesses_run_on_demand_once_per_case_and_inputs():
    from harness.program import parse
    from harness.program import witness_run as program_witness
    from harness.spec import program_case
    from cases import nearmiss

    spec = CaseSpec.from_dict(nearmiss.spec_of(nearmiss.get("qwen"), "float16"))
    inputs = make_inputs(spec)
    ref = reference(spec, inputs)
    first = ref.witness_outputs()
    # qwen: a mean of squares, so every order, the Welford ones too (harness.program.statistics)
    assert len(first) == len(program_witness.WITNESSES) and all(o.dtype == np.float16 and o.shape == ref.out.shape for o in first)
    assert reference(spec, inputs).witness_outputs() is first  # the same case in this process: computed once
    case = program_case(spec)
    arrays = {**inputs.arrays, **inputs.params}
    moved = {**arrays, "x": (arrays["x"] + 1).astype(np.float16)}  # (rms norm ignores a scale)
    other = witness_error.program_witnesses(spec.case_id, parse(spec.program, case=case), case, moved)()
    assert not np.array_equal(other[0], first[0])  # other bytes under the same key: not the cached outputs
    np.testing.assert_array_equal(first[0], program_witness.outputs(parse(spec.program, case=case), case, arrays)[0][1])


def test_a_program_no_witness_can_walk_has_none(monkeypatch):
    from harness.program import witness_run as program_witness
    from cases import nearmiss

    def unknown(*args, **kwargs):
        raise NotImplementedError("an op with no NumPy form")

    monkeypatch.setattr(program_witness, "outputs", unknown)
    spec = CaseSpec.from_dict(nearmiss.spec_of(nearmiss.get("qwen"), "bfloat16", seed=11))
    assert reference(spec, make_inputs(spec)).witness_outputs() == ()
