"""Each zoo implementation is built, exported and lifted on the runner's workers; a hang or a crash costs its task;
the ops outside the language are what the lifter has no handler for."""
import pytest

from harness.zoo.catalog import load_zoo
from harness.engine.zoo_builds import outside, packet, resolve_zoo, summary


def test_a_hang_a_crash_and_a_bad_init_each_cost_one_row_and_the_rest_lift(tiny_models):
    zoo = load_zoo(root=str(tiny_models))
    rows = {r["representative"].rpartition(":")[2]: r["results"]["float32"]
            for r in resolve_zoo(zoo, dtypes=("float32",), jobs=2, timeout=12,
                                 names={"AlphaRMSNorm", "AlphaSleepyRMSNorm", "AlphaCrashRMSNorm",
                                        "AlphaGatedRMSNorm", "AlphaLayerNorm2d"})}
    assert rows["AlphaSleepyRMSNorm"]["status"] == "failed" and rows["AlphaSleepyRMSNorm"]["stage"] == "timeout"
    assert rows["AlphaCrashRMSNorm"]["status"] == "failed" and rows["AlphaCrashRMSNorm"]["stage"] == "crash"
    for name in ("AlphaRMSNorm", "AlphaGatedRMSNorm", "AlphaLayerNorm2d"):
        assert rows[name]["status"] == "lifted", rows[name]
    assert {"aten.rsqrt.default", "aten.mean.dim"} <= set(rows["AlphaRMSNorm"]["ops"])


def test_transformers_representatives_build_export_and_lift():
    pytest.importorskip("transformers", reason="the zoo reads transformers: pip install 'normdiff[zoo]'")
    names = {"LlamaRMSNorm", "SamLayerNorm", "Qwen3NextRMSNormGated"}  # shared RMSNorm, channels-first LN, gated
    rows = resolve_zoo(load_zoo(), dtypes=("float32", "bfloat16"), jobs=2, names=names)
    assert {r["representative"].rpartition(":")[2] for r in rows} == names
    assert summary(rows, ("float32", "bfloat16"))["failures"] == []
    ops = {r["representative"].rpartition(":")[2]: set(r["results"]["bfloat16"]["ops"]) for r in rows}
    assert {"aten.permute.default", "aten.layer_norm.default"} <= ops["SamLayerNorm"]
    assert "aten.silu.default" in ops["Qwen3NextRMSNormGated"]
    llama = next(r for r in rows if r["representative"].endswith(":LlamaRMSNorm"))
    assert len(llama["members"]) > 100 and llama["results"]["bfloat16"]["pattern"] == "rms_norm"


def test_packets_of_aten_and_builtin_names():
    assert packet("aten.pow.Tensor_Scalar") == "pow"
    assert packet("<built-in function getitem>") == "getitem"


def test_outside_leaves_out_the_language_and_export_bookkeeping():
    ops = ["aten._assert_tensor_metadata.default", "aten.add.Tensor", "aten.mean.dim", "aten.rsqrt.default",
           "aten.to.dtype", "aten.silu.default", "aten.permute.default", "<built-in function getitem>"]
    assert outside(ops) == []
    assert outside(["aten.cumprod.default", "aten.cat.default", "aten.silu.default", "aten.sort.default"]) == \
        ["aten.cumprod.default", "aten.sort.default"]
