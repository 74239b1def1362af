"""The anchors: the other oracles the benchmark scores normdiff beside."""
from harness.benchmark import anchors
from harness.core.dtypes import cast


def test_anchors_flag_a_gross_error_and_pass_eager_itself(spec, ref_of):
    ref = ref_of(spec())
    eager = cast(ref.out, "float16")
    bad = cast(ref.out * 1.5, "float16")
    for name, oracle in anchors.ANCHORS.items():
        assert oracle(bad, eager, ref.out), name
        assert not oracle(eager, eager, ref.out), name
