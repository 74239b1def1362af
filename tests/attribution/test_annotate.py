"""Attribution in records: only failing executions pay for it, paths and patterns that cannot say why,
and eager's own intermediates as the check of the pairing and of the stage bounds."""
import json

import pytest
from helpers import seed

from harness import paths
from harness.attribution import ATTRIBUTED, annotate, attribute
from harness.attribution.annotate import CAPTURES
from dataclasses import replace

from harness.core.records import Record, dumps
from harness.core.verdicts import Verdict
from harness.spec import CaseSpec
from harness.engine.execute import Executor
from harness.oracle.inputs import make_inputs

MANUAL = {"pattern": "layer_norm", "style": "manual", "dtype": "float16", "shape": [4, 256], "params": {"kind": "normal"}}
QWEN = json.load(open(seed("executorch-24428-qwen-fp16.json")))


def _run(executor, spec, path):
    """A real execution's record, and the path's real output, for annotate()."""
    record = executor.execute(spec, path)
    inputs = make_inputs(spec)
    prepared = executor._prepare(paths.get(path), spec, inputs)[0]
    return record, inputs, prepared.run(inputs.run_arg)


@pytest.mark.slow
def test_passing_executions_carry_no_attribution_and_make_no_extra_run(session_cache):
    before = CAPTURES["count"]
    executor = Executor(session_cache)
    for path in ("eager", "tvm"):
        record = executor.execute(json.load(open(seed("tvm-20909.json"))), path)
        assert record["verdict"] == "pass"
        assert "attribution" not in record and "first_stage_over" not in record
        assert "attribution_seconds" not in record and "attribution" not in record["facts"]
    assert CAPTURES["count"] == before
    assert "pass" not in ATTRIBUTED and "error" not in ATTRIBUTED


@pytest.mark.slow
def test_a_path_that_runs_as_one_call_says_why(session_cache):
    spec = CaseSpec.from_dict(QWEN)
    record, inputs, out = _run(Executor(session_cache), spec, "executorch")
    record = replace(record, verdict=Verdict.INACCURATE)  # as if it had failed: the same output, the same path object
    before = CAPTURES["count"]
    record = annotate(record, spec, paths.get("executorch"), inputs, out)
    assert record["attribution"] is None and record["first_stage_over"] is None
    assert record["facts"]["attribution"].startswith("unavailable: path 'executorch' does not expose")
    assert CAPTURES["count"] == before  # nothing re-run for a path whose intermediates cannot be read
    json.loads(dumps(record))


def test_a_pattern_without_a_program_says_why():
    spec = CaseSpec.from_dict({"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3]})
    record, inputs, out = _run(Executor(), spec, "eager")
    record = replace(record, verdict=Verdict.INACCURATE)
    record = annotate(record, spec, paths.get("eager"), inputs, out)
    assert record["facts"]["attribution"].startswith("unavailable: no program for the batch_norm module")


@pytest.mark.parametrize("raw", [MANUAL, QWEN, {**QWEN, "dtype": "bfloat16"}], ids=["manual", "qwen", "qwen-bf16"])
def test_eager_pairs_every_stage_with_its_own_op_within_its_bound(raw):
    """eager computes each stage as the program writes it: one node per stage, each within its bound."""
    spec = CaseSpec.from_dict(raw)
    _, inputs, out = _run(Executor(), spec, "eager")
    result = attribute(spec, paths.get("eager"), inputs, out, "inaccurate")
    entries = result.stages
    assert entries and all(e["dtype"] == e["program_dtype"] for e in entries)
    ops = {"mean": "mean", "sub": "sub", "pow": "pow", "add": "add", "sqrt": "sqrt", "div": "div", "mul": "mul",
           "rsqrt": "rsqrt", "cast": ("to", "_to_copy")}
    for e in entries:
        assert any(f"aten.{name}." in e["node"] for name in ([ops[e["op"]]] if isinstance(ops[e["op"]], str)
                                                             else ops[e["op"]])), e
        assert not e["over"] and e["max_err_over_tol"] <= 1.0, e
        assert e["approximate"] is False
    assert result.first_stage_over is None
    assert "bit-identical" in result.note


FUSED_ADD = {"pattern": "rms_norm", "dtype": "bfloat16", "shape": [4, 64], "params": {"kind": "normal"},
             "inputs": {"r": {"kind": "normal"}},
             "program": "h = x.float() + r.float()\nv = h.pow(2).mean(-1, keepdim=True)\n"
                        "normed = (h * torch.rsqrt(v + eps)).to(x.dtype) * w\nreturn normed, h.to(x.dtype)"}


def test_each_output_of_a_program_of_several_anchors_its_own_stage():
    """`return normed, h.to(x.dtype)`: the program's last stage is the second output's cast, not the first
    output; each output's stage pairs with the node the graph returns for it (eager: every stage its own node,
    within its bound), where anchoring the last stage to the first output put the cast 369x over its bound."""
    from harness.attribution.stages import program_stages

    spec = CaseSpec.from_dict(FUSED_ADD)
    _, inputs, out = _run(Executor(), spec, "eager")
    assert isinstance(out, tuple) and len(out) == 2
    stages = program_stages(spec, inputs)
    assert [(s.label, s.returns) for s in stages if s.returns is not None] == [("normed:mul#2", 0), ("return:cast", 1)]
    result = attribute(spec, paths.get("eager"), inputs, out, "inaccurate")
    by_stage = {e["stage"]: e for e in result.stages}
    assert set(by_stage) == {s.label for s in stages}
    assert by_stage["normed:mul#2"]["node"] == "mul_1 = aten.mul.Tensor"
    assert by_stage["return:cast"]["node"].endswith("aten.to.dtype") and by_stage["return:cast"]["dtype"] == "bfloat16"
    assert all(e["node"] is not None and not e["over"] for e in result.stages)
    assert result.first_stage_over is None and "bit-identical" in result.note


def test_eager_layer_norm_in_float32_exposes_its_kernels_statistics():
    """F.layer_norm is one node; native_layer_norm (the same kernel) returns its float32 mean and rstd."""
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [4, 256],
                               "params": {"kind": "normal"}})
    _, inputs, out = _run(Executor(), spec, "eager")
    entries = attribute(spec, paths.get("eager"), inputs, out, "inaccurate").stages
    by_stage = {e["stage"]: e for e in entries}
    assert set(by_stage) == {"return:layer_norm.mean", "return:layer_norm.rstd", "return:layer_norm"}
    assert by_stage["return:layer_norm.rstd"]["node"].endswith("native_layer_norm.default#rsqrt")
    assert not any(e["over"] for e in entries)
    # in float16 the kernel returns its statistics rounded to float16: they are not what it used
    spec16 = CaseSpec.from_dict({**spec.to_dict(), "dtype": "float16", "weight_dtype": "float16"})
    _, inputs16, out16 = _run(Executor(), spec16, "eager")
    entries16 = attribute(spec16, paths.get("eager"), inputs16, out16, "inaccurate").stages
    assert [e["stage"] for e in entries16] == ["return:layer_norm"]


@pytest.mark.slow
def test_tvm_float16_means_are_over_their_bound_on_the_manual_layer_norm(session_cache):
    """The manual layer_norm writes its mean in float16; torch accumulates it in float32, TVM in float16."""
    spec = CaseSpec.from_dict(MANUAL)
    _, inputs, out = _run(Executor(session_cache), spec, "tvm")
    result = attribute(spec, paths.get("tvm"), inputs, out, "inaccurate")
    by_stage = {e["stage"]: e for e in result.stages}
    assert result.first_stage_over == "mean:mean"
    assert by_stage["mean:mean"]["node"] == "lv = relax.mean" and by_stage["mean:mean"]["max_err_over_tol"] > 2
    assert not by_stage["h:add"]["over"]  # var + eps: the variance's error is not the sum's
    assert all(e["approximate"] is False for e in result.stages)  # the re-run is the path's, bit for bit


@pytest.mark.slow
def test_failing_cases_of_one_structure_share_one_rebuild():
    """Only the input differs: one recompile with the bindings exposed, one run per case."""
    executor = Executor()
    raw = json.load(open(seed("tvm-20909.json")))
    builds, runs = CAPTURES["builds"], CAPTURES["count"]
    firsts = []
    for amplitude in (0.25, 0.125):
        r = executor.execute({**raw, "input": {"kind": "alternating", "amplitude": amplitude, "offset": 0}},
                             "tvm-decompose")
        assert r["verdict"] == "inaccurate"
        firsts.append(r["first_stage_over"])
    assert firsts == ["return:layer_norm.variance"] * 2
    assert CAPTURES["builds"] == builds + 1 and CAPTURES["count"] == runs + 2


PLUGIN = "float16-storage=tests.plugin_paths:Float16StoragePath"
QWEN32 = {"pattern": "rms_norm", "style": "qwen", "dtype": "float32", "shape": [4, 64], "params": {"kind": "normal"}}


def test_an_out_of_tree_path_with_the_hook_gets_an_attribution_table(cli, tmp_path):
    """A plug-in path that implements Path.intermediates, run by the real command line, is attributed."""
    case = tmp_path / "case.json"
    case.write_text(json.dumps(QWEN32))
    out = tmp_path / "out"
    proc = cli("run", "--case", str(case), "--paths", "eager,float16-storage", "--jobs", "0", "--quiet",
               "--no-cache", "--no-history", "--out", str(out), env={paths.ENV: PLUGIN})
    assert proc.returncode == 1, proc.stderr  # its float16 storage is a finding
    records = {r["path"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    record = records["float16-storage"]
    assert record["verdict"] == "inaccurate" and record["facts"]["attribution"] == "read", record["facts"]
    table = record["attribution"]
    assert table and all(e["dtype"] == "float16" and e["program_dtype"] == "float32" for e in table if e["node"])
    # the first value it stores is the float32 copy of x, already rounded to float16: that stage lost it
    assert record["first_stage_over"] == "h:cast"
    assert "float32 values stored in float16" in record["attribution_note"]
    assert "attribution" not in records["eager"]


def test_a_path_without_the_hook_says_not_available():
    """The default Path.intermediates: the record says the path does not expose them."""
    path = paths.Path()
    path.name = "plain"
    spec = CaseSpec.from_dict(QWEN32)
    inputs = make_inputs(spec)
    record = Record(spec.case_id, spec.to_dict(), "plain", verdict=Verdict.INACCURATE)
    record = annotate(record, spec, path, inputs, inputs.x)
    assert record["attribution"] is None
    assert record["facts"]["attribution"] == ("unavailable: path 'plain' does not expose its intermediates "
                                              "(a compiled library or a delegated program runs as one call)")
