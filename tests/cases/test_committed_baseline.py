"""The committed baseline: every entry is a nightly execution, triaged, and readable."""

from cases.suites import suite
from harness import paths
from harness.reports.baseline import load_baseline
from harness.spec import CaseSpec

from helpers import BASELINE  # noqa: E402


def test_every_known_failure_is_a_triaged_nightly_execution():
    entries = load_baseline(BASELINE)
    nightly = {s.case_id: s for s in suite("nightly")}
    assert len(entries) > 100
    for (case_id, path), e in entries.items():
        assert case_id in nightly, f"{case_id} is not in the nightly suite: the gate would call it MISSING"
        assert path in paths.names()
        assert CaseSpec.from_dict(e.case).case_id == case_id  # the stored spec is the case
        assert not e.reason.startswith("untriaged"), (case_id, path, e.reason)
    # the two seeds are known failures with their upstream reports
    seeds = {(e.path, e.upstream) for e in entries.values()}
    assert ("tvm-decompose", "apache/tvm#20909") in seeds
    assert ("executorch-recompose", "pytorch/executorch#24428") in seeds
