"""The ops of an exported graph that the program language does not express yet."""
from harness.zoo.language import outside, packet


def test_packets_of_aten_and_builtin_names():
    assert packet("aten.pow.Tensor_Scalar") == "pow"
    assert packet("<built-in function getitem>") == "getitem"


def test_outside_leaves_out_the_language_and_export_bookkeeping():
    ops = ["aten._assert_tensor_metadata.default", "aten.add.Tensor", "aten.mean.dim", "aten.rsqrt.default",
           "aten.to.dtype", "aten.silu.default", "aten.permute.default", "<built-in function getitem>"]
    assert outside(ops) == []
    assert outside(["aten.cumsum.default", "aten.cat.default", "aten.silu.default"]) == \
        ["aten.cat.default", "aten.cumsum.default"]
