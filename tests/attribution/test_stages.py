"""A case's program stages (harness/attribution/stages.py); a gradient case's are its lifted backward's."""
import numpy as np

from harness.attribution.stages import BackwardCase, program_stages
from harness.engine.cases import Cases
from harness.spec import CaseSpec


def test_a_gradient_cases_stages_are_its_lifted_backwards_each_output_held_to_its_scored_bound():
    """The stages of `return d_x, d_weight, d_bias`, each gradient's stage anchored to its output and bounded as
    its score is: the sums over rows as the cotangent's random walk (harness.oracle.cotangent_walk)."""
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [64, 64], "grad": True})
    setup = Cases().setup(spec)
    lifted = setup.backward
    assert lifted.program.source.endswith("return _to_copy_6, _to_copy_7, _to_copy_8")
    stages = program_stages(spec, setup.inputs, backward=BackwardCase(lifted, setup.build))
    labels = [s.label for s in stages]
    assert labels[:2] == ["_to_copy:cast", "var_mean_var:var"] and "rsqrt:rsqrt" in labels
    returned = sorted((s.returns, s) for s in stages if s.returns is not None)
    assert [(k, s.label, s.dtype) for k, s in returned] == [
        (0, "_to_copy_6:cast", "float16"), (1, "_to_copy_7:cast", "float16"), (2, "_to_copy_8:cast", "float16")]
    for (k, s), ref in zip(returned, setup.ref.outputs):
        assert np.array_equal(np.broadcast_to(s.err, ref.bound.shape), ref.bound), s.label
    # the walk: d_weight's sum over 64 rows of dy times the normalized x (whose error each row carries) is bounded
    # tighter than the first-order sum of its rows' errors, which an asymmetric cotangent gets
    first_order = program_stages(CaseSpec.from_dict({**spec.to_dict(), "cotangent": {"kind": "normal", "mean": 1.0}}),
                                 setup.inputs, backward=BackwardCase(lifted, setup.build))
    d_weight = {s.label: s for s in first_order}["sum_3:sum"]
    assert (np.asarray({s.label: s for s in stages}["sum_3:sum"].err) < np.asarray(d_weight.err)).all()
