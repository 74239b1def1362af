"""The committed baselines: every entry is an execution of its suite, triaged, and readable."""
import importlib.util

import pytest

from cases.suites import suite
from harness import paths
from harness.reports.baseline import load_baseline
from harness.spec import CaseSpec

from helpers import BASELINE, CONTEXT_BASELINE, GRADIENTS_BASELINE, SHAPES_BASELINE, ZOO_BASELINE  # noqa: E402


def assert_triaged(entries, suite_name):
    """Every entry is an execution of `suite_name` (else the gate calls it MISSING), its stored spec is the case,
    and its reason is a triage rule's or a hand-written one, never "untriaged"."""
    cases = {s.case_id for s in suite(suite_name)}
    for (case_id, path), e in entries.items():
        assert case_id in cases, f"{case_id} is not in the {suite_name} suite: the gate would call it MISSING"
        assert path in paths.names()
        assert CaseSpec.from_dict(e.case).case_id == case_id  # the stored spec is the case
        assert not e.reason.startswith("untriaged"), (case_id, path, e.reason)


def test_every_known_failure_is_a_triaged_nightly_execution():
    entries = load_baseline(BASELINE)
    assert len(entries) > 100
    assert_triaged(entries, "nightly")
    # the two seeds are known failures with their upstream reports
    seeds = {(e.path, e.upstream) for e in entries.values()}
    assert ("tvm-decompose", "apache/tvm#20909") in seeds
    assert ("executorch-recompose", "pytorch/executorch#24428") in seeds


def test_the_zoo_baseline_reads_without_the_zoo_extra():
    entries = load_baseline(ZOO_BASELINE)  # module specs parse without importing their classes
    assert len(entries) > 100
    assert all(e.case["class"].startswith("transformers.models.") for e in entries.values())


def test_every_known_zoo_failure_is_a_triaged_zoo_execution():
    pytest.importorskip("transformers", reason="the zoo suite reads transformers: pip install 'normdiff[zoo]'")
    entries = load_baseline(ZOO_BASELINE)
    assert_triaged(entries, "zoo")
    found = {(e.path, e.upstream, e.case["dtype"], e.verdict) for e in entries.values()}
    # the seed on the shared Llama/Qwen RMSNorm, and ONNX Runtime's missing bfloat16 kernels
    llama = [e for e in entries.values() if e.case["class"].endswith(":LlamaRMSNorm")]
    assert {(e.path, e.upstream, e.case["dtype"]) for e in llama} >= {
        ("executorch-recompose", "pytorch/executorch#24428", "float16"),
        ("executorch-recompose", "pytorch/executorch#24428", "bfloat16")}
    assert ("onnxruntime", "new", "bfloat16", "unsupported") in found
    assert ("tvm-decompose", "apache/tvm#20909", "bfloat16", "inaccurate") in found


def test_every_known_context_failure_is_a_triaged_context_execution():
    """The context suite's baseline: each entry a neighbourhood of the suite with its reason; the reports the
    pinned libraries carry are there (onnxruntime#31980's expanding scale; RecomposeRmsNorm's float32 rebuild
    behind a residual add)."""
    entries = load_baseline(CONTEXT_BASELINE)
    assert_triaged(entries, "context")
    found = {(e.path, e.upstream, e.verdict) for e in entries.values()}
    assert ("onnxruntime-fused", "microsoft/onnxruntime#31980", "error") in found
    assert ("executorch-recompose", "pytorch/executorch#24428", "dtype_mismatch") in found
    assert all(e.reason and e.upstream for e in entries.values())


def test_every_known_shapes_failure_is_a_triaged_symbolic_execution():
    """The shapes suite's baseline: each entry a symbolic case of the suite with its reason; the symbolic
    compile's own findings are there (TVM's float16 count past the literal check, apache/tvm#17744)."""
    entries = load_baseline(SHAPES_BASELINE)
    if importlib.util.find_spec("transformers") is None:  # the suite's zoo cases come with the zoo extra
        entries = {k: e for k, e in entries.items() if not e.case.get("class", "").startswith("transformers.")}
    assert_triaged(entries, "shapes")
    assert all(e.case.get("dynamic") and e.reason and e.upstream for e in entries.values())
    assert ("tvm", "apache/tvm#17744", "inaccurate") in {(e.path, e.upstream, e.verdict) for e in entries.values()}


def test_every_known_gradients_failure_is_a_triaged_backward_execution():
    """The gradients suite's baseline: each entry a `"grad": true` case of the suite with its reason; the catalog's
    gradient findings are there (torch's half statistics on the paths derived from torch, tvm-decompose's float16
    training flow, eager's half sums)."""
    pytest.importorskip("transformers", reason="the gradients suite samples the zoo: pip install 'normdiff[zoo]'")
    entries = load_baseline(GRADIENTS_BASELINE)
    assert_triaged(entries, "gradients")
    assert all(e.case.get("grad") and e.reason and e.upstream for e in entries.values())
    found = {(e.path, e.upstream, e.verdict) for e in entries.values()}
    assert {("inductor", "pytorch/pytorch#77407", "inaccurate"), ("tvm", "new", "unsupported")} <= found
    tvm = {e.reason for e in entries.values() if e.path == "tvm-decompose" and e.case["dtype"] == "float16"}
    assert any("apache/tvm#20909" in reason for reason in tvm)
