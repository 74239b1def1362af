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


def module_record(path, verdict, dtype="float32", message="", program="", ratio=None):
    """A module case's record (the zoo's): the class, the lifted program and the error over the bound."""
    spec = CaseSpec.from_dict({"class": "transformers.models.x.modeling_x:XNorm", "dtype": dtype, "shape": [2, 8, 64]})
    r = record(spec, path, verdict, message)
    r.update(program=program, max_err_over_tol=ratio)
    return r


def test_a_class_the_language_cannot_hold_is_not_a_compiler_finding_on_any_path():
    cls = "transformers.models.x.modeling_x:XNorm"
    for path in ("eager", "tvm", "onnxruntime"):  # ORT's own unsupported rule does not take it
        r = module_record(path, "unsupported", "bfloat16", f"class {cls}: op aten.cumsum.default is outside the "
                                                           "program language")
        assert triage(r)[1].startswith("not a compiler finding")
    r = module_record("tvm", "unsupported", "float16", f"class {cls}: does not run in eager with a float16 input ...")
    assert triage(r)[1].startswith("by design: transformers keeps")


def test_the_zoos_families_by_path_and_lifted_program():
    affine = "layer_norm = F.layer_norm(x, (64,), weight, bias, 1e-06)\nreturn layer_norm"
    r = module_record("tvm", "inaccurate", "float16", "12 of 32 rows beyond ...", affine, ratio=0.7)
    assert "TOPI layer_norm.h/group_norm.h" in triage(r)[1]
    r["max_err_over_tol"] = 3.0  # over the bound: not this family
    assert triage(r) is None or "TOPI layer_norm.h" not in triage(r)[1]
    gated = "silu = F.silu(gate)\nmul = x * silu\nreturn mul"
    assert triage(module_record("onnxruntime-fused", "inaccurate", "float32", "", gated, 0.7))[0] \
        == "microsoft/onnxruntime#22557"
    r = module_record("onnxruntime", "inaccurate", "float16", "4 of 64 rows beyond what correct float32 "
                                                              "implementations achieve", affine, 0.2)
    assert triage(r)[1].startswith("by design: onnxruntime's CPU provider runs float16 Mul/Add in float32")
    r = module_record("tvm", "error", "bfloat16", 'import: TypeError: ir.Op(name="relax.nn.group_norm", ...) '
                                                   "expects that data must be flo")
    assert triage(r)[1].startswith("relax.nn.group_norm rejects a bfloat16 input")
