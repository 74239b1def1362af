"""One execution of a case of several outputs: every path returns every output, each is scored, the worst sets
the verdict, and the record round-trips through its JSON."""
import json

import pytest

from harness import paths
from harness.core.records import Record, dumps
from harness.core.verdicts import SCORED, Verdict, worst
from harness.spec import CaseSpec

# vLLM's fused residual add + RMSNorm (tests/user_norms.py): forward(x, residual) -> (normed, x + residual), the sum
# kept in float32 for the statistic (vllm-project/vllm#52104's native path).
FUSED_MODULE = {"class": "user_norms:FusedAddRMSNorm", "init": {"hidden_size": 64}, "shape": [4, 64],
                "dtype": "float16", "params": {"kind": "normal"}, "inputs": {"residual": {"kind": "normal"}}}
FUSED_PROGRAM = {"pattern": "rms_norm", "dtype": "bfloat16", "shape": [4, 64], "params": {"kind": "normal"},
                 "inputs": {"r": {"kind": "normal"}},
                 "program": "h = x.float() + r.float()\nv = h.pow(2).mean(-1, keepdim=True)\n"
                            "normed = (h * torch.rsqrt(v + eps)).to(x.dtype) * w\nreturn normed, h.to(x.dtype)"}


def round_trips(record: Record) -> bool:
    return Record.from_dict(json.loads(dumps(record))) == record


@pytest.mark.parametrize("path", paths.names())
def test_a_module_returning_two_tensors_gets_two_scores_on_every_path_and_the_worse_verdict(execute_cached, path):
    record = execute_cached(FUSED_MODULE, path)
    assert record.lift is not None and record.lift.lift_check < 1e-12  # each output checked against the module's
    assert [s.name for s in record.scores] == ["0", "1"], record.message  # named by position in the forward
    verdicts = [s.verdict for s in record.scores]
    assert record.verdict == min(verdicts, key=SCORED.index)  # the worse of the two
    assert record.verdict_output == record.scores[worst(record.scores)].name and record.score.verdict == record.verdict
    assert record.to_dict()["verdict_output"] == record.verdict_output and len(record.to_dict()["outputs"]) == 2
    if path.startswith("executorch-recompose"):  # the rebuilt float32 norm: the normalized output only
        assert verdicts == [Verdict.DTYPE_MISMATCH, Verdict.PASS] and record.verdict_output == "0"
        assert record.message.startswith("output 0: output dtype float32")
    elif path == "eager":
        assert verdicts == [Verdict.PASS, Verdict.PASS]
    assert round_trips(record)


def test_a_program_returning_two_values_round_trips_through_its_record(execute_cached):
    for path, verdicts in (("eager", ["pass", "pass"]), ("executorch-recompose", ["dtype_mismatch", "pass"])):
        record = execute_cached(FUSED_PROGRAM, path)
        d = record.to_dict()
        assert [(o["name"], o["verdict"]) for o in d["outputs"]] == list(zip(("normed", "1"), verdicts))
        assert d["verdict"] == verdicts[0] and d["verdict_output"] == "normed"
        assert d["max_err_over_tol"] == d["outputs"][0]["max_err_over_tol"]  # the verdict's output, flat
        back = Record.from_dict(json.loads(dumps(record)))
        assert back == record and back.verdict_output == "normed" and back.scores == record.scores


# Qwen's RMSNorm (its statistic in float32) over symbolic rows: one compile, several row counts.
QWEN_ROWS = {"pattern": "rms_norm", "style": "qwen", "dtype": "float32", "shape": [4, 64], "dynamic": [0],
             "params": {"kind": "normal"}}
SYMBOLIC = {"size-hint": "tests.plugin_paths:SizeHintPath",
            "float16-storage-symbolic": "tests.plugin_paths:SymbolicFloat16StoragePath"}


@pytest.fixture
def symbolic_paths(monkeypatch):
    monkeypatch.setenv(paths.ENV, "")
    for name, target in SYMBOLIC.items():
        paths.register(name, target)


def at(rows: int) -> dict:
    return {**QWEN_ROWS, "shape": [rows, 64]}


def test_a_symbolic_failure_carries_its_static_control_symbolic_only(symbolic_paths):
    """Compiled at the first size, run at others: the path's failures at other sizes pass compiled
    statically at those sizes (the static control, its own artifact): symbolic only."""
    from harness.core.records import static_scope
    from harness.engine.execute import Executor

    executor = Executor()
    first, *others = [executor.execute(at(n), "size-hint") for n in (4, 5, 97)]
    assert first.verdict == Verdict.PASS and first.static_control is None and "static_control" not in first
    assert executor.misses == 2 * (1 + len(others))  # eager's and the path's symbolic compiles, then both for
    # the static control of each failing size
    for record in others:
        assert record.verdict == Verdict.INACCURATE, record.message
        assert record.static_control.verdict == Verdict.PASS and static_scope(record) == "symbolic only"
        assert record.static_control.max_err_over_tol <= 1 < record["max_err_over_tol"]
        assert record.structure_key == first.structure_key and round_trips(record)
        assert record["static_control"] == {"verdict": "pass", "max_abs_err": record.static_control.max_abs_err,
                                            "max_err_over_tol": record.static_control.max_err_over_tol,
                                            "message": record.static_control.message}
        assert record.attribution is not None  # attribution read the symbolic compile's failure


def test_a_failure_the_static_compile_shares_is_also_static(symbolic_paths):
    from harness.core.records import static_scope
    from harness.engine.execute import Executor

    executor = Executor()
    record = executor.execute(at(97), "float16-storage-symbolic")
    assert record.verdict == Verdict.INACCURATE and static_scope(record) == "also static"
    assert record.static_control.verdict == Verdict.INACCURATE and record.static_control.max_abs_err > 0
    static = executor.execute(CaseSpec.from_dict(at(97)).static(), "float16-storage-symbolic")
    assert "static_control" not in static and static_scope(static) is None  # a static case: no control, as before
    assert static.get("max_abs_err") == record.static_control.max_abs_err  # the control is that very execution


def test_a_failure_the_baseline_expects_gets_no_static_control_unless_every_one_is_asked(symbolic_paths):
    """As attribution: a known failure is no news, and its static control would be a compile per size."""
    from harness.attribution.policy import Policy
    from harness.engine.execute import Executor

    spec = CaseSpec.from_dict(at(7))
    known = {(spec.case_id, "size-hint"): frozenset({Verdict.INACCURATE})}
    for every, controlled in ((False, False), (True, True)):
        executor = Executor(policy=Policy(known, every))
        executor.execute(at(4), "size-hint")
        record = executor.execute(spec, "size-hint")
        assert record.verdict == Verdict.INACCURATE and (record.static_control is not None) == controlled


def test_a_symbolic_module_case_runs_every_size_from_one_compile_scored_against_its_own_size():
    """torch's nn.RMSNorm with its sequence symbolic on TVM: one lift and one compile for the structure, each
    size's output scored against the lifted program evaluated at that size (before: an error at every size but
    the first, the reference made at the first's shape)."""
    from harness.engine.execute import Executor

    raw = {"class": "torch.nn:RMSNorm", "init": {"normalized_shape": 16}, "pattern": "rms_norm", "dtype": "float16",
           "shape": [2, 13, 16], "dynamic": [1], "dynamic_max": 64, "params": {"kind": "normal"}}
    executor = Executor()
    records = [executor.execute({**raw, "shape": [2, n, 16]}, "tvm") for n in (13, 7, 1)]
    assert [r.verdict for r in records] == [Verdict.PASS] * 3, [r.message for r in records]
    assert executor.misses == 2  # eager's and tvm's one compile each
    assert len({r.structure_key for r in records}) == 1 and all(r["facts"]["compiles"] == 1 for r in records)
    assert [r["worst_row"] < 2 * n for r, n in zip(records, (13, 7, 1))] == [True] * 3  # rows of its own size


# -- a gradient case's attribution: the stages of its lifted backward (docs/attribution.md "The backward") ---------
LN16_GRAD = {"pattern": "layer_norm", "dtype": "float16", "shape": [64, 64], "grad": True}


def _stage(record, label) -> dict:
    return next(e for e in record["attribution"] if e["stage"] == label)


@pytest.fixture(scope="module")
def grad_cache(tmp_path_factory):
    """An artifact cache of this module's own (attributions kept in it are this code's), and an executor over it:
    the gradient tests below share the case's setup (its lift) and each path's artifact."""
    from harness.engine.cache import ArtifactCache
    from harness.engine.execute import Executor

    cache = ArtifactCache(tmp_path_factory.mktemp("grad-cache"))
    return cache, Executor(cache)


def test_a_failing_gradient_on_eager_names_the_statistics_torch_saves_in_float16(grad_cache):
    """nn.LayerNorm in float16, 64 rows of 64: torch's CPU native_layer_norm saves mean and rstd in float16 for
    native_layer_norm_backward, where the lifted backward keeps them in float32; the mean comes first."""
    from harness.attribution.annotate import CAPTURES
    from harness.engine.execute import Executor

    cache, executor = grad_cache
    record = executor.execute(LN16_GRAD, "eager")
    assert record.verdict == Verdict.INACCURATE and record["facts"]["attribution"] == "read"
    assert record["first_stage_over"] == "var_mean_mean:mean"
    for label, kernel_item in (("var_mean_mean:mean", "#mean"), ("rsqrt:rsqrt", "#rsqrt")):
        entry = _stage(record, label)
        assert entry["dtype"] == "float16" and entry["program_dtype"] == "float32" and entry["over"]
        assert entry["node"].endswith("aten.native_layer_norm.default" + kernel_item)
    # each gradient's stage is the value the graph returns for it: native_layer_norm_backward's outputs
    for k, label in enumerate(("_to_copy_6:cast", "_to_copy_7:cast", "_to_copy_8:cast")):
        assert _stage(record, label)["node"].startswith(f"native_layer_norm_backward[{k}] = ")
    assert not any(e["approximate"] for e in record["attribution"])
    assert "bit-identical" in record["attribution_note"]
    assert round_trips(record)
    # the attribution cache keeps a gradient record's too: a new executor reads it back without a re-run
    runs = CAPTURES["count"]
    again = Executor(cache).execute(LN16_GRAD, "eager")
    assert again["attribution"] == record["attribution"] and CAPTURES["count"] == runs


def test_a_passing_gradient_gets_no_attribution():
    from harness.engine.execute import Executor

    record = Executor().execute({**LN16_GRAD, "dtype": "float32", "shape": [4, 64]}, "eager")
    assert record.verdict == Verdict.PASS
    assert "attribution" not in record and "first_stage_over" not in record and "attribution" not in record["facts"]


@pytest.mark.slow
def test_a_failing_gradient_on_tvm_decompose_names_its_float16_variance(grad_cache):
    """TVM's training flow (DecomposeOpsForTraining, then Gradient): every op float16, the variance first over
    (the seed-class finding tvm-new-gradient-fp16), read from the differentiated main's bindings."""
    pytest.importorskip("tvm")
    record = grad_cache[1].execute(LN16_GRAD, "tvm-decompose")
    assert record.verdict == Verdict.INACCURATE and record["facts"]["attribution"] == "read"
    assert record["first_stage_over"] == "var_mean_var:var"
    entry = _stage(record, "var_mean_var:var")
    assert entry["node"] == "lv2 = relax.variance" and entry["dtype"] == "float16" and entry["max_err_over_tol"] > 100
    assert not any(e["approximate"] for e in record["attribution"])
