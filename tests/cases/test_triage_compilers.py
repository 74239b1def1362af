"""The iree and openvino rules: a failure is tied by what its record says (facts, message, input, CPU)."""
from cases.triage import triage
from harness.core.verdicts import Verdict
from harness.engine.execute import failed
from harness.reports.baseline import updated
from harness.spec import CaseSpec

SEED = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
                           "input": {"kind": "alternating", "amplitude": 0.25}})
QWEN_BF16 = CaseSpec.from_dict({"pattern": "rms_norm", "style": "qwen", "dtype": "bfloat16", "shape": [2, 8, 64]})
SUBNORMAL = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [4, 256],
                                "input": {"kind": "subnormal", "fraction": 1.0}})


def record(spec, path, verdict, message="", facts=None, cpu=None):
    r = failed(spec, path, Verdict(verdict), message=message, facts=facts or {}).to_dict()
    r["cpu"] = cpu
    return r


def test_the_seed_on_iree_is_torch_mlirs_layer_norm_decomposition_when_it_summed_in_float16():
    assert triage(record(SEED, "iree", "inaccurate", facts={"iree_reduction_dtypes": ["f16"]}))[0] == \
        "llvm/torch-mlir#2091"
    # a float16 layer norm that summed in float32 is not that report
    assert triage(record(SEED, "iree", "inaccurate", facts={"iree_reduction_dtypes": ["f32"]})) is None


def test_iree_flushes_subnormals_by_design_and_turbines_bfloat16_parameters_are_its_report():
    assert triage(record(SUBNORMAL, "iree", "inaccurate"))[1].startswith("by design: IREE's CPU runtime")
    assert triage(record(QWEN_BF16, "iree", "error", "TypeError: Got unsupported ScalarType BFloat16"))[0] == \
        "iree-org/iree-turbine#1127"


def test_openvinos_bf16_qwen_holds_only_on_a_bf16_cpu_and_its_entry_says_so():
    facts = {"ov_runtime_nodes": ["Eltwise:bf16", "Reduce:bf16"], "ov_fused_rms": False}
    on = record(QWEN_BF16, "openvino-bf16", "inaccurate", facts=facts, cpu=["avx2", "avx512_bf16"])
    off = {**on, "cpu": ["avx2"]}
    assert triage(on)[0] == "openvinotoolkit/openvino#36718"
    assert triage(off) is None  # there OpenVINO runs float32: a failure would be new
    entry = updated([on], {})[(QWEN_BF16.case_id, "openvino-bf16")]
    assert entry.cpu == ("avx512_bf16", "amx_bf16") and entry.holds_on(off) is False


def test_an_openvino_conversion_error_is_told_by_its_failed_check():
    mixed = CaseSpec.from_dict({"pattern": "group_norm", "dtype": "float16", "weight_dtype": "float32",
                                "shape": [2, 16, 4, 8], "groups": 4})
    message = ("RuntimeError: openvino: converting aten::group_norm: Check 'element::Type::merge(result_et, "
               "node->get_input_element_type(0), node->get_input_element_type(1))' failed")
    assert "without aligning their types" in triage(record(mixed, "openvino", "error", message))[1]
    assert triage(record(mixed, "openvino", "error", "RuntimeError: openvino: out of memory")) is None
