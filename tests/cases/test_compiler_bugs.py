"""The iree and openvino catalog entries: in the catalog, on their paths, each finding tied to a triage rule."""
from cases import bugs, compiler_bugs
from cases.triage import triage
from harness import paths
from harness.core.verdicts import Verdict
from harness.engine.execute import failed


def test_the_compiler_findings_are_in_the_catalog_on_registered_paths_with_controls():
    assert {b.id for b in compiler_bugs.BUGS} <= set(bugs.ids())
    for b in compiler_bugs.BUGS:
        assert b.note and (b.link is None) == ("-new-" in b.id), b.id
        assert set(b.paths) <= set(paths.names()) and b.controls, b.id
        assert {p for _, p in b.controls} <= set(b.paths), b.id


def test_each_error_entry_is_the_triage_rule_of_its_message():
    """The errors' messages, as the paths write them, reach the rule the baseline ties them to."""
    messages = {
        "iree-turbine-1127": "TypeError: Got unsupported ScalarType BFloat16",
        "iree-new-bf16-arith-constant": "RuntimeError: iree-compile: 'arith.constant' op failed to verify that all "
                                        "of {value, result} have same type",
        "iree-new-group-norm-mixed-cast": "RuntimeError: iree-compile: 'tensor.cast' op operand type "
                                          "'tensor<16xf32>' and result type 'tensor<16xf16>' are cast incompatible",
        "iree-new-instance-norm-none": "RuntimeError: iree-compile: 'torch.aten.unsqueeze' op operand #0 must be "
                                       "Any Torch tensor type, but got '!torch.none'",
    }
    for bug_id, message in messages.items():
        b = bugs.get(bug_id)
        r = failed(b.specs[0], b.paths[0], Verdict.ERROR, message=message).to_dict()
        found = triage(r)
        assert found is not None and (found[0] == "new") == (b.link is None), (bug_id, found)
