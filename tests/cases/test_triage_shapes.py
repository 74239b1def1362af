"""The shapes suite's triage rules: a symbolic failure its static control does not share goes to the symbolic
compile's own cause; one the static compile shares falls through to the rule that explains the static one."""
from cases.triage import triage
from harness.core.verdicts import Verdict
from harness.engine.execute import failed
from harness.spec import CaseSpec

INSTANCE = {"pattern": "instance_norm", "dtype": "float16", "shape": [1, 4, 70000], "dynamic": [2],
            "input": {"kind": "uniform", "low": -1.0, "high": 3.0}}


def record(raw: dict, path: str, verdict: str, control: str | None, message: str = "") -> dict:
    """A failing record of `raw` on `path` (as the runner writes it), with a static control of verdict `control`."""
    r = failed(CaseSpec.from_dict(raw), path, Verdict(verdict), message=message).to_dict()
    if control is not None:
        r["static_control"] = {"verdict": control, "max_abs_err": None, "max_err_over_tol": None, "message": ""}
    return r


def test_tvm_past_float16s_count_is_the_literal_check_the_symbolic_compile_skips():
    refused = record(INSTANCE, "tvm", "inaccurate", "error", "946.8 off")
    assert triage(refused)[0] == "apache/tvm#17744" and "symbolic only" in triage(refused)[1]
    below = record({**INSTANCE, "shape": [1, 4, 4097]}, "tvm", "inaccurate", "pass")
    assert triage(below)[0] == "new" and "static compile of the same length passes" in triage(below)[1]
    static = record({k: v for k, v in INSTANCE.items() if k != "dynamic"}, "tvm", "inaccurate", None)
    assert triage(static)[0] == "new" and "TOPI instance_norm takes its element count" in triage(static)[1]


def test_a_failure_the_static_compile_shares_falls_through_to_the_static_rule():
    shared = record({**INSTANCE, "shape": [1, 4, 4097]}, "executorch", "inaccurate", "inaccurate")
    assert triage(shared)[0] == "pytorch/executorch#16727"  # as the static record is
    iree = record({**INSTANCE, "shape": [1, 4, 13]}, "iree", "nonfinite", "pass")
    assert "iree-org/iree#23650" in triage(iree)[1] and triage(iree)[0] == "new"


def test_compile_errors_of_symbolic_dims_name_their_compiler():
    twin = {"pattern": "layer_norm", "dtype": "float16", "shape": [2, 67], "dynamic": [1],
            "program": "return F.layer_norm(x, (x.shape[-1],), None, None, eps)"}
    tvm = record(twin, "tvm", "error", "pass", "import: TypeError: int() argument must be a string, a bytes-like "
                                               "object or a real number, not 'Node'")
    assert "SizeVar" in triage(tvm)[1]


def test_a_symbolic_module_cases_failure_the_static_compile_shares_takes_the_static_rule():
    """The shapes suite's module and zoo cases with their sequence symbolic: torch's nn.RMSNorm on iree (float16
    sums, also static) and the zoo's Llama RMSNorm on the recompose paths (float32 out, also static) are the
    findings their static compiles are, not the symbolic compile's."""
    base = {"class": "torch.nn:RMSNorm", "init": {"normalized_shape": 64}, "pattern": "rms_norm", "dtype": "float16",
            "shape": [2, 67, 64], "dynamic": [1], "dynamic_max": 8192, "params": {"kind": "normal"}}
    iree = record(base, "iree", "inaccurate", "inaccurate")
    iree.update(program="rms_norm = F.rms_norm(x, (64,), weight, None)\nreturn rms_norm",
                facts={"iree_reduction_dtypes": ["f16"], "compiles": 1})
    assert triage(iree)[0] == "llvm/torch-mlir#4207"
    llama = {**base, "class": "transformers.models.llama.modeling_llama:LlamaRMSNorm",
             "init": {"hidden_size": 64, "eps": 1e-06}}
    recompose = record(llama, "executorch-recompose", "dtype_mismatch", "dtype_mismatch")
    assert triage(recompose)[0] == "pytorch/executorch#24428" and "symbolic" not in triage(recompose)[1]
