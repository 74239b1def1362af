"""The probe builds, runs and exports real classes in child processes; hangs and crashes cost one record."""
import pytest

from harness.zoo.catalog import load_zoo
from harness.zoo.probe import probe_zoo, run_tasks, summary


def _task(name, **extra):
    spec = {"class": f"tinylib.models.alpha.modeling_alpha:{name}", "init": {"hidden_size": 64},
            "shape": [2, 8, 64], "dtype": "float32", "params": {"kind": "normal"}, "seed": 0, **extra}
    return {"id": name, "spec": spec}


def test_a_hang_a_crash_and_a_bad_init_each_cost_one_record(tiny_library):
    [sleepy] = run_tasks([_task("AlphaSleepyRMSNorm")], jobs=1, timeout=5, sys_path=str(tiny_library))
    assert (sleepy["status"], sleepy["stage"], sleepy["reason"]) == ("failed", "timeout", "no answer in 5 s")
    tasks = [_task("AlphaCrashRMSNorm"), _task("AlphaRMSNorm"),
             {"id": "bad", "spec": {**_task("AlphaRMSNorm")["spec"], "init": {"nope": 1}}},
             {"id": "missing", "spec": {**_task("AlphaRMSNorm")["spec"], "class": "tinylib.models.alpha.modeling_alpha:Nope"}}]
    recs = {r["id"]: r for r in run_tasks(tasks, jobs=1, sys_path=str(tiny_library))}
    assert recs["AlphaCrashRMSNorm"]["stage"] == "crash" and "exit code 3" in recs["AlphaCrashRMSNorm"]["reason"]
    good = recs["AlphaRMSNorm"]
    assert good["status"] == "exported" and good["finite"] is True and good["double"] is True
    assert {"aten.rsqrt.default", "aten.mean.dim", "aten.pow.Tensor_Scalar"} <= set(good["ops"])
    assert recs["bad"]["stage"] == "build" and "nope" in recs["bad"]["reason"]
    assert recs["missing"]["stage"] == "import" and "Nope" in recs["missing"]["reason"]


def test_a_config_class_is_built_in_the_child(tiny_library):
    spec = {"class": "tinylib.models.alpha.modeling_alpha:AlphaConfigRMSNorm", "shape": [2, 8, 64],
            "init": {"config": {"class": "tinylib.models.alpha.configuration_alpha:AlphaConfig",
                                "hidden_size": 64, "num_attention_heads": 4}},
            "dtype": "bfloat16", "params": {"kind": "normal"}, "seed": 0}
    bad = {**spec, "init": {"config": {**spec["init"]["config"], "num_attention_heads": 5}}}
    recs = run_tasks([{"id": "ok", "spec": spec}, {"id": "bad", "spec": bad}], jobs=1, sys_path=str(tiny_library))
    assert recs[0]["status"] == "exported"
    assert recs[1]["stage"] == "config" and "divisible" in recs[1]["reason"]


def test_transformers_representatives_build_and_export():
    pytest.importorskip("transformers", reason="the zoo reads transformers: pip install 'normdiff[zoo]'")
    names = {"LlamaRMSNorm", "SamLayerNorm", "Qwen3NextRMSNormGated"}  # shared RMSNorm, channels-first LN, gated
    rows = probe_zoo(load_zoo(), dtypes=("float32", "bfloat16"), jobs=2, names=names)
    assert {r["representative"].rpartition(":")[2] for r in rows} == names
    assert summary(rows, ("float32", "bfloat16"))["failures"] == []
    ops = {r["representative"].rpartition(":")[2]: set(r["results"]["bfloat16"]["ops"]) for r in rows}
    assert "aten.rsqrt.default" in ops["LlamaRMSNorm"]
    assert {"aten.permute.default", "aten.layer_norm.default"} <= ops["SamLayerNorm"]
    assert "aten.silu.default" in ops["Qwen3NextRMSNormGated"]
    llama = next(r for r in rows if r["representative"].endswith(":LlamaRMSNorm"))
    assert len(llama["members"]) > 100 and llama["results"]["bfloat16"]["finite"] is True
