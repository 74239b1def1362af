"""Triage rules: a new failure in the baseline gets its upstream report, or 'untriaged'."""
import json

import pytest

from cases.triage import triage
from harness.core.verdicts import Verdict
from harness.engine.execute import failed
from harness.reports.baseline import load_baseline
from harness.spec import CaseSpec

SEED = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
                           "input": {"kind": "alternating", "amplitude": 0.25}})
QWEN = CaseSpec.from_dict({"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 8, 64]})


def record(spec, path, verdict, message=""):
    return failed(spec, path, Verdict(verdict), message=message).to_dict()


def test_seed_failures_are_tied_to_their_reports():
    assert triage(record(SEED, "tvm-decompose", "inaccurate"))[0] == "apache/tvm#20909"
    assert triage(record(QWEN, "executorch-recompose", "dtype_mismatch"))[0] == "pytorch/executorch#24428"
    assert triage(record(SEED, "tvm", "crash", "worker died (SIGSEGV)")) is None


def test_gate_update_triages_new_failures(cli_here, tmp_path):
    results = tmp_path / "results.jsonl"
    rows = [record(SEED, "tvm-decompose", "inaccurate"), record(SEED, "tvm", "crash", "worker died (SIGSEGV)"),
            record(QWEN, "eager", "pass")]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    baseline = tmp_path / "baseline.json"
    r = cli_here("gate", str(results), "--baseline", str(baseline), "--update")
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


def module_record(path, verdict, dtype="float32", message="", program="", ratio=None, facts=None):
    """A module case's record (the zoo's): the class, the lifted program and the error over the bound."""
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "class": "transformers.models.x.modeling_x:XNorm",
                               "dtype": dtype, "shape": [2, 8, 64]})
    r = record(spec, path, verdict, message)
    r.update(program=program, max_err_over_tol=ratio, facts=facts or {})
    return r


def test_a_class_the_language_cannot_hold_is_not_a_compiler_finding_on_any_path():
    cls = "transformers.models.x.modeling_x:XNorm"
    for path in ("eager", "tvm", "onnxruntime"):  # ORT's own unsupported rule does not take it
        r = module_record(path, "unsupported", "bfloat16", f"class {cls}: op aten.cumsum.default is outside the "
                                                           "program language")
        assert triage(r)[1].startswith("not a compiler finding")
    r = module_record("tvm", "unsupported", "float16", f"class {cls}: does not run in eager with a float16 input ...")
    assert triage(r)[1].startswith("by design: transformers keeps")


AFFINE = "layer_norm = F.layer_norm(x, (64,), weight, bias, 1e-06)\nreturn layer_norm"
WRITTEN = "mean = x.mean(-1, keepdim=True)\nvar = x.var(-1, keepdim=True, correction=0)\nreturn (x - mean) * var"
GATED = "silu = F.silu(gate)\nmul = x * silu\nreturn mul"
AT_FLOOR = ("1 of 16 rows beyond what correct float32 implementations achieve; ... error beyond 2 ulp of float32 "
            "0.0926 per unit of the bound, over 2x eager's 0, the float32 witnesses' 0.0254 and the floor 0.0833")


@pytest.mark.parametrize("path, verdict, dtype, message, program, ratio, facts, words", [
    ("tvm", "inaccurate", "float16", "12 of 32 rows beyond ...", AFFINE, 0.7, None, "TOPI layer_norm.h/group_norm.h"),
    ("tvm-decompose", "inaccurate", "float16", "", AFFINE, 9.0, None, "DecomposeOpsForTraining splits"),
    ("tvm-decompose", "inaccurate", "float16", "", WRITTEN, 9.0, None, "R.mean / R.variance on float16"),
    ("onnxruntime-fused", "inaccurate", "float32", "", GATED, 0.7, None, "Sigmoid (MLAS"),
    ("onnxruntime", "inaccurate", "float16", "4 of 64 rows beyond what correct float32 implementations achieve",
     AFFINE, 0.2, None, "by design: onnxruntime's CPU provider runs float16 Mul/Add in float32"),
    ("inductor", "inaccurate", "float32", AT_FLOOR, GATED, 0.15, None, "marginal, not a bug"),
    ("tvm", "error", "bfloat16", 'import: TypeError: ir.Op(name="relax.nn.group_norm", ...) expects that data must be flo',
     "", None, None, "relax.nn.group_norm rejects a bfloat16 input"),
    ("tvm", "error", "float16", "import: TypeError: Binary operators must have the same datatype for both operands.  "
     "However, R.add(p_linear_bias, lv5) uses datatype T.float16 on the LHS (...), and datatype T.float32 on the RHS",
     "", None, None, "out_dtype='float32' hard-coded"),
    ("executorch", "inaccurate", "bfloat16", "", "linear = F.linear(silu, linear_weight, linear_bias)\nreturn linear",
     0.5, None, "portable addmm kernel"),
    ("executorch-xnnpack", "inaccurate", "float16", "", WRITTEN, 174.0, None, "portable var kernel"),
    ("executorch-xnnpack", "nonfinite", "float16", "", "s = torch.sqrt(v)\nreturn x / s", None, None,
     "XNNPACK's float16 sqrt"),
    ("executorch-recompose", "error", "float16", "RuntimeError: Given normalized_shape=[64], expected input with "
     "shape [*64], but got input of size[2, 8, 4, 16]", "", None, {"rms_norm_built": True}, "a grouped RMSNorm"),
])
def test_the_zoos_families_by_path_and_lifted_program(path, verdict, dtype, message, program, ratio, facts, words):
    found = triage(module_record(path, verdict, dtype, message, program, ratio, facts))
    assert found is not None and words in found[1], found


def test_a_zoo_family_keeps_to_its_conditions():
    # over the bound, the float16 affine of TOPI's norms is not the explanation
    r = module_record("tvm", "inaccurate", "float16", "", AFFINE, ratio=3.0)
    assert triage(r) is None or "TOPI layer_norm.h" not in triage(r)[1]
    # far beyond the program rule's floor, a float32 finding is not marginal
    r = module_record("inductor", "inaccurate", "float32", AT_FLOOR.replace("0.0926", "0.587"), GATED, 0.6)
    assert triage(r) is None or "marginal" not in triage(r)[1]


def test_xnnpack_float16_linear_is_by_design_on_avx512_fp16_and_its_entry_says_so():
    """A new failure's entry takes the rule's CPU features: --update on an AVX512-FP16 runner writes an entry
    that does not turn into FIXED on the next AVX2 runner."""
    from harness.reports.baseline import updated

    program = "linear = F.linear(emb, linear_weight, linear_bias)\nreturn linear"
    on = {**record(QWEN, "executorch-xnnpack", "inaccurate"), "program": program, "cpu": ["avx2", "avx512_fp16"]}
    off = {**on, "cpu": ["avx2"]}
    assert "sums in float16 on CPUs with native float16" in triage(on)[1]
    assert "portable addmm" in triage(off)[1]  # the rule for the portable kernel, as on the executorch path
    entry = updated([on], {})[(QWEN.case_id, "executorch-xnnpack")]
    assert entry.cpu == ("avx512_fp16",) and entry.holds_on(on) and entry.holds_on(off) is False
