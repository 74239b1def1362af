"""Which failures get an attribution: every one by default, not those the baseline expects, all on request."""
from harness.attribution.policy import SKIPPED, Policy
from harness.core.records import Record
from harness.core.verdicts import Verdict


def rec(verdict, case_id="c1", path="tvm"):
    return Record(case_id, {}, path, verdict=Verdict(verdict))


def test_without_a_baseline_every_failure_is_new():
    assert Policy().wants(rec("inaccurate"))


def test_a_known_failure_with_its_expected_verdict_is_skipped_and_says_so():
    policy = Policy({("c1", "tvm"): frozenset({"inaccurate"})})
    assert policy.wants(rec("nonfinite"))  # another verdict than expected: news
    assert policy.wants(rec("inaccurate", case_id="c2"))
    known = rec("inaccurate")
    assert not policy.wants(known)
    known = policy.skip(known)
    assert known["attribution"] is None and known["first_stage_over"] is None  # docs/contracts.md §4 keys kept
    assert known["facts"]["attribution"] == SKIPPED


def test_on_request_every_failure_is_attributed():
    assert Policy({("c1", "tvm"): frozenset({"inaccurate"})}, every=True).wants(rec("inaccurate"))


def test_the_policy_crosses_to_a_worker_as_plain_data():
    import json

    policy = Policy({("c1", "tvm"): frozenset({"inaccurate", "nonfinite"})})
    back = Policy.from_config(json.loads(json.dumps(policy.config())))
    assert back == policy and Policy.from_config(None) == Policy()


def test_apply_weighs_the_task_the_verdict_and_the_baseline_in_one_place():
    policy = Policy({("c1", "tvm"): frozenset({"inaccurate"})})
    calls = []

    def attribute(record):
        calls.append(record.key)
        return record.with_fact("attribution", "read")

    assert policy.apply(rec("pass"), True, attribute) == rec("pass")  # a pass pays nothing
    assert policy.apply(rec("error"), True, attribute) == rec("error")  # no output to attribute
    assert policy.apply(rec("nonfinite", case_id="c2"), False, attribute) == rec("nonfinite", case_id="c2")
    assert calls == []  # nor does a failure whose task did not ask (fuzz's search)
    skipped = policy.apply(rec("inaccurate"), True, attribute)
    assert calls == [] and skipped["facts"]["attribution"] == SKIPPED and skipped["attribution"] is None
    news = policy.apply(rec("inaccurate", case_id="c2"), True, attribute)
    assert calls == [("c2", "tvm")] and news.facts == {"attribution": "read"}
