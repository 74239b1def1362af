"""`normdiff model`: a whole model's norm instances, captured in a worker, each a module case with its captured input,
in model order with per-path verdicts; the whole model beside eager; --outliers, --max-memory, repro of an instance."""
import hashlib
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from harness.core import captured
from harness.spec import CaseSpec
from helpers import ROOT, normdiff, normdiff_here

ENV = {"PYTHONPATH": os.path.join(ROOT, "tests")}  # the user's folder of models on PYTHONPATH
MIXER = ["user_models:TinyMixer", "--init", '{"width": 16, "groups": 4}', "--dtype", "float16", "--shape", "2", "4",
         "16", "--jobs", "1", "--quiet"]
# eager upcasts every reduction; tvm-decompose's decomposed float16 layer_norm reduces in float16
PATHS = "eager,tvm-decompose"


def model_json(out) -> dict:
    with open(os.path.join(out, "model.json"), encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture(scope="module")
def mixer(tmp_path_factory):
    """TinyMixer in float16 on two paths, without and with --outliers: (its folder, the command's result) each."""
    runs = {}
    for name, extra in (("plain", []), ("outliers", ["--outliers"])):
        out = str(tmp_path_factory.mktemp(name))
        runs[name] = (out, normdiff("model", *MIXER, "--paths", PATHS, "--out", out, *extra, env=ENV))
    return runs


@pytest.mark.xdist_group("mixer")  # its module fixture once, on one worker
def test_a_user_models_three_norms_are_listed_in_model_order_with_verdicts(mixer):
    out, r = mixer["plain"]
    about = model_json(out)
    assert [(i["path"], i["cls"]) for i in about["instances"]] == [
        ("norm_in", "torch.nn.modules.normalization:LayerNorm"),
        ("group", "torch.nn.modules.normalization:GroupNorm"),
        ("norm_out", "user_models:LlamaStyleRMSNorm")]
    assert about["instances"][1]["shape"] == [2, 16, 4]  # GroupNorm is given (N, C, L): its own input, as called
    records = [json.loads(line) for line in open(os.path.join(out, "results.jsonl"), encoding="utf-8")]
    ids = [i["case_id"] for i in about["instances"]]
    for case_id, inst in zip(ids, about["instances"]):
        mine = {rec["path"]: rec for rec in records if rec["case_id"] == case_id}
        assert set(mine) == {"eager", "tvm-decompose"}
        case = mine["eager"]["case"]
        assert case["instance"] == inst["path"] and case["input"] == {"kind": "captured", "sha256": inst["sha256"]}
        assert mine["eager"]["verdict"] == "pass"  # eager is the behaviour every path is held to
    table = r.stdout
    assert table.index("`norm_in`") < table.index("`group`") < table.index("`norm_out`")
    assert r.returncode == (1 if any(rec["verdict"] != "pass" for rec in records) else 0), r.stderr
    assert [w["path"] for w in about["whole"]] == ["eager", "tvm-decompose"]
    assert about["whole"][0]["rel_err"] is not None  # the whole model's error beside eager's: shown, not judged
    assert os.path.exists(os.path.join(out, "model.md")) and os.path.exists(os.path.join(out, "summary.md"))


@pytest.mark.xdist_group("mixer")  # its module fixture once, on one worker
def test_outliers_reach_the_norms_on_the_residual_stream_and_float16_reductions_break(mixer):
    """Planted at 1e4x the median in two channels of token 0, every norm reading the residual stream sees them; a
    path reducing in float16 (tvm-decompose's layer_norm) loses far more than without, eager (upcasting) passes."""
    plain, planted = model_json(mixer["plain"][0]), model_json(mixer["outliers"][0])
    assert planted["outliers"]["scale"] == 1e4 and planted["outliers"]["tokens"] == [0]
    assert planted["instances"][0]["max_abs"] > 1000 * plain["instances"][0]["max_abs"] / 10

    def over(out, about, path):
        by_id = {json.loads(line)["case_id"] + json.loads(line)["path"]: json.loads(line)
                 for line in open(os.path.join(out, "results.jsonl"), encoding="utf-8")}
        return [by_id[i["case_id"] + path] for i in about["instances"]]

    before = over(mixer["plain"][0], plain, "tvm-decompose")[0]
    after = over(mixer["outliers"][0], planted, "tvm-decompose")[0]
    assert after["verdict"] == "inaccurate"
    assert after["max_err_over_tol"] > 10 * before["max_err_over_tol"]
    assert all(r["verdict"] == "pass" for r in over(mixer["outliers"][0], planted, "eager"))


# torch's own nn.RMSNorm at width 16: iree's float16 rms_norm (squared and summed in float16, llvm/torch-mlir#4207)
# stays within the bound on normal activations at this width, eager's kernel upcasts
STACK = ["user_models:TinyRMSStack", "--init", '{"width": 16}', "--dtype", "float16", "--shape", "1", "4", "16",
         "--paths", "eager,iree", "--jobs", "1", "--quiet"]


def test_planted_activations_flip_a_float16_reducing_path_from_pass_to_fail(tmp_path):
    """Sun et al. 2024's recipe (1e4x the median in two fixed channels, at the first token and a delimiter's): every
    RMSNorm instance passes on iree without them and fails with them, its float16 sum of squares overflowing
    (|x| > 256 squares past float16's 65504); eager passes both; the whole model's output shows it too."""
    runs = {}
    for name, extra in (("plain", []), ("outliers", ["--outliers", "--outlier-tokens", "0", "3"])):
        out = tmp_path / name
        r = normdiff("model", *STACK, "--out", str(out), *extra, env=ENV)
        about = model_json(out)
        lines = (out / "results.jsonl").read_text().splitlines()
        records = {(rec["case_id"], rec["path"]): rec for rec in map(json.loads, lines)}
        runs[name] = (r, about, [{p: records[(i["case_id"], p)] for p in ("eager", "iree")}
                                 for i in about["instances"]])
    (r0, plain, before), (r1, planted, after) = runs["plain"], runs["outliers"]
    assert [i["path"] for i in plain["instances"]] == [i["path"] for i in planted["instances"]] == ["norm_1", "norm_f"]
    out = planted["outliers"]
    assert out["scale"] == 1e4 and out["tokens"] == [0, 3] and len(out["channels"]) == 2
    assert out["value"] == pytest.approx(1e4 * out["median"]) and 256 < out["value"] < 65504  # x*x overflows
    assert all(i["max_abs"] < 10 for i in plain["instances"]) and all(i["max_abs"] > 256 for i in planted["instances"])
    for b, a in zip(before, after):
        assert b["eager"]["verdict"] == a["eager"]["verdict"] == "pass"
        assert b["iree"]["verdict"] == "pass", b["iree"]["message"]
        assert a["iree"]["verdict"] == "inaccurate" and a["iree"]["max_err_over_tol"] > 100
        assert a["iree"]["facts"]["iree_reduction_dtypes"] == ["f16"]  # why: the reduction runs in float16
    assert r0.returncode == 0 and r1.returncode == 1 and "`iree`: `norm_1`" in r1.stdout
    whole = {name: {w["path"]: w["rel_err"] for w in about["whole"]} for name, (_, about, _) in runs.items()}
    assert whole["outliers"]["iree"] > 100 * whole["plain"]["iree"]  # the zeroed rows reach the output


@pytest.mark.xdist_group("mixer")  # its module fixture once, on one worker
def test_an_instances_case_id_is_the_same_in_another_process(mixer, tmp_path):
    """A second capture, in another worker process, stores the same bytes under the same hashes: the same case ids."""
    from harness.commands.model import instance_specs
    from harness.engine.model_capture import ModelTarget
    from harness.engine.model_worker import capture_in_worker

    out, _ = mixer["plain"]
    about = model_json(out)
    spec = CaseSpec.from_dict({"class": about["target"], "init": about["init"], "dtype": "float16",
                               "shape": about["shape"], "seed": 0})
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    try:
        cap = capture_in_worker(ModelTarget(spec.to_dict(), None, str(tmp_path / "store")), 300,
                                str(tmp_path / "log"))
    finally:
        sys.path.remove(os.path.join(ROOT, "tests"))
    assert cap.problem is None
    again = instance_specs(spec, cap.instances)
    assert [again[i["path"]].case_id for i in about["instances"]] == [i["case_id"] for i in about["instances"]]
    for i in about["instances"]:
        with open(os.path.join(str(tmp_path / "store"), i["sha256"] + captured.SUFFIX), "rb") as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == i["sha256"]


@pytest.mark.xdist_group("mixer")  # its module fixture once, on one worker
def test_an_instances_repro_script_reads_its_captured_input_bit_for_bit(mixer, tmp_path):
    out, _ = mixer["plain"]
    inst = model_json(out)["instances"][2]
    r = normdiff("repro", inst["case_id"], "--path", "eager", "--results", os.path.join(out, "results.jsonl"),
                 "-o", str(tmp_path) + os.sep, env=ENV)
    assert r.returncode == 0, r.stderr
    copied = tmp_path / "captured" / (inst["sha256"] + captured.SUFFIX)
    assert hashlib.sha256(copied.read_bytes()).hexdigest() == inst["sha256"]
    script = next(tmp_path.glob("repro-*.py"))
    assert "get_submodule('norm_out')" in script.read_text()
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=str(tmp_path),
                         env=dict(os.environ, **ENV), timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr  # eager passes: the script asserts the input's hash first
    x = np.frombuffer(copied.read_bytes(), dtype=np.float16)
    assert x.size == np.prod(inst["shape"])


def test_captured_activations_over_max_memory_fail_in_one_line_and_keep_what_was_written(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text("kept\n")
    r = normdiff("model", *MIXER, "--paths", "eager", "--out", str(out), "--max-memory", "0.0000004", env=ENV)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1].startswith("normdiff: error: the captured activations outgrow "
                                                        "--max-memory")
    assert (out / "results.jsonl").read_text() == "kept\n" and not (out / "model.json").exists()
    assert len(os.listdir(out / "captured")) == 1  # the instance captured within the budget is kept


@pytest.mark.parametrize("args, message", [
    (["user_models:NoSuchModel"], "has no class 'NoSuchModel'"),
    (["user_models", "--shape", "2", "4"], "TARGET: expected"),
    (["user_models:TinyMixer", "--tokens", "4", "--shape", "2", "4"], "--tokens: give either"),
    (["user_models:TinyMixer", "--init", "{"], "--init: not valid JSON"),
    (["user_models:TinyMixer", "--dtype", "float64"], "spec key 'dtype'"),
    (["user_models:TinyMixer", "--paths", "nowhere"], "--paths: unknown path"),
    (["user_models:TinyMixer", "--outliers", "-1"], "--outliers: the scale must be > 0"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    if "NoSuchModel" in args[0]:  # the class is looked up in the worker (it is user code)
        r = normdiff("model", *args, "--paths", "eager", "--out", str(tmp_path / "o"), "--quiet", env=ENV)
    else:
        r = normdiff_here("model", *args, "--out", str(tmp_path / "o"), cwd=str(tmp_path))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("normdiff: error: ") and message in r.stderr and len(r.stderr.splitlines()) == 1
    assert not (tmp_path / "o" / "results.jsonl").exists()


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="the zoo extra (transformers)")
def test_a_two_layer_llama_in_bfloat16_lists_every_rmsnorm_and_recompose_gives_float32(tmp_path):
    """2 RMSNorms a layer and the final one, each with its verdicts; on executorch-recompose each comes back
    float32, the seed pytorch/executorch#24428 (RecomposeRmsNorm drops the cast back), found in the whole model."""
    config = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
              "num_key_value_heads": 1, "vocab_size": 64, "use_cache": False}
    r = normdiff("model", "LlamaForCausalLM", "--config", json.dumps(config), "--dtype", "bfloat16", "--tokens", "4",
                 "--paths", "eager,executorch-recompose", "--out", str(tmp_path), "--jobs", "1", "--quiet")
    about = model_json(tmp_path)
    assert [i["path"] for i in about["instances"]] == [
        "model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm",
        "model.layers.1.input_layernorm", "model.layers.1.post_attention_layernorm", "model.norm"]
    records = [json.loads(line) for line in open(tmp_path / "results.jsonl", encoding="utf-8")]
    recompose = [rec for rec in records if rec["path"] == "executorch-recompose"]
    assert len(recompose) == 5 and {rec["verdict"] for rec in recompose} == {"dtype_mismatch"}
    assert {rec["out_dtype"] for rec in recompose} == {"float32"}
    assert {rec["verdict"] for rec in records if rec["path"] == "eager"} == {"pass"}
    assert r.returncode == 1 and "`executorch-recompose`: `model.layers.0.input_layernorm`" in r.stdout


@pytest.mark.xdist_group("mixer")  # its module fixture once, on one worker
def test_the_instances_run_again_as_pytest_tests_from_their_specs_file(mixer, tmp_path):
    """OUT/instances.jsonl with pytest's --normdiff-case: one test per instance × path, the inputs found beside it."""
    from importlib.metadata import entry_points

    out, _ = mixer["plain"]
    plugin = [] if any(ep.value == "harness.pytest_plugin" for ep in entry_points(group="pytest11")) else \
        ["-p", "harness.pytest_plugin"]
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    r = subprocess.run([sys.executable, "-m", "pytest", *plugin, "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
                        "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path),
                        "--normdiff-case", os.path.join(out, "instances.jsonl"), "--normdiff-paths", "eager"],
                       capture_output=True, text=True, cwd=str(tmp_path), timeout=600,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")])))
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
