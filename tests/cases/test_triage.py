"""Triage rules: a new failure in the baseline gets its upstream report, or 'untriaged'."""
import json

from cases.triage import triage
from harness.engine.execute import base_record
from harness.reports.baseline import load_baseline
from harness.spec import CaseSpec

SEED = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
                           "input": {"kind": "alternating", "amplitude": 0.25}})
QWEN = CaseSpec.from_dict({"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 8, 64]})


def record(spec, path, verdict, message=""):
    r = base_record(spec, path)
    r.update(verdict=verdict, message=message)
    return r


def test_seed_failures_are_tied_to_their_reports():
    assert triage(record(SEED, "tvm-decompose", "inaccurate"))[0] == "apache/tvm#20909"
    assert triage(record(QWEN, "executorch-recompose", "dtype_mismatch"))[0] == "pytorch/executorch#24428"
    assert triage(record(SEED, "tvm", "crash", "worker died (SIGSEGV)")) is None


def test_gate_update_triages_new_failures(cli, tmp_path):
    results = tmp_path / "results.jsonl"
    rows = [record(SEED, "tvm-decompose", "inaccurate"), record(SEED, "tvm", "crash", "worker died (SIGSEGV)"),
            record(QWEN, "eager", "pass")]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    baseline = tmp_path / "baseline.json"
    r = cli("gate", str(results), "--baseline", str(baseline), "--update")
    assert r.returncode == 0, r.stderr
    entries = load_baseline(str(baseline))
    by_path = {e.path: e for e in entries.values()}
    assert set(by_path) == {"tvm-decompose", "tvm"}
    assert by_path["tvm-decompose"].upstream == "apache/tvm#20909"
    assert by_path["tvm"].upstream == "new" and by_path["tvm"].reason.startswith("untriaged: crash")


def test_program_failures_are_told_apart_by_the_near_miss_they_run():
    from cases import nearmiss

    near = CaseSpec.from_dict(nearmiss.spec_of(nearmiss.get("cube"), "float32"))
    twice = CaseSpec.from_dict(nearmiss.spec_of(nearmiss.get("used-twice"), "float32"))
    legit = CaseSpec.from_dict(nearmiss.spec_of(nearmiss.get("qwen"), "float32"))
    built = {"rms_norm_built": True}
    r = record(near, "executorch-recompose", "inaccurate")
    r["facts"] = built
    assert triage(r)[0] == "pytorch/executorch#24428" and "almost an RMSNorm" in triage(r)[1]
    r = record(twice, "executorch-recompose", "inaccurate")
    r["facts"] = built
    assert triage(r) == ("new", triage(r)[1]) and "another user" in triage(r)[1]
    r = record(legit, "executorch-recompose", "inaccurate")  # a legitimate norm broken some other way
    r["facts"] = built
    assert triage(r) is None or "almost an RMSNorm" not in triage(r)[1]


def test_a_float16_copy_on_tvm_is_told_apart_by_whether_it_overflows():
    from cases import nearmiss

    narrowing = CaseSpec.from_dict(nearmiss.spec_of(nearmiss.get("narrowing-cast"), "float32"))
    under = record(narrowing, "tvm", "inaccurate")
    under["max_err_over_tol"] = 0.301  # the float16 sum and 1 / sqrt on a normal row (nightly, 18c4e33daedf)
    over = record(narrowing, "tvm", "inaccurate")
    over["max_err_over_tol"] = 185.0  # the float16 sum overflowing on an outlier row
    assert "under the bound" in triage(under)[1]
    assert "overflows" in triage(over)[1]
