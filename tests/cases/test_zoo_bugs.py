"""The zoo's catalog entries: each module case is one the zoo suite runs, so a finding is the suite's own record."""
import pytest

from cases import bugs, zoo_bugs


def test_the_zoos_findings_are_in_the_catalog_with_their_executions():
    ids = set(bugs.ids())
    assert {b.id for b in zoo_bugs.BUGS} <= ids
    assert all(b.note and (b.link is None) == ("-new-" in b.id) for b in zoo_bugs.BUGS)
    assert {b.needs for b in zoo_bugs.BUGS} <= {(), ("transformers",)}


def test_every_module_case_of_a_zoo_finding_is_a_zoo_suite_case():
    pytest.importorskip("transformers", reason="the zoo reads transformers: pip install 'normdiff[zoo]'")
    from cases.suites import suite

    zoo = {s.case_id for s in suite("zoo")}
    for b in zoo_bugs.BUGS:
        for spec, _ in [*b.checks, *b.controls]:
            if spec.cls:
                assert spec.case_id in zoo, (b.id, spec.cls, spec.dtype)
