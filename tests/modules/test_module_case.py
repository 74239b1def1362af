"""One module case resolved in a worker (harness.modules.module_case): at another size of its symbolic dims it
keeps its module and lifted program, checked at that size's shape."""
from harness.modules.module_case import resolve
from harness.spec import CaseSpec

RAW = {"class": "torch.nn:LayerNorm", "init": {"normalized_shape": 16}, "dtype": "float16", "shape": [2, 13, 16],
       "dynamic": [1], "dynamic_max": 64}


def test_a_symbolic_case_at_another_size_keeps_its_lift_checked_at_that_shape():
    case = resolve(CaseSpec.from_dict(RAW))
    other = case.at(CaseSpec.from_dict({**RAW, "shape": [2, 1, 16]}))
    assert other.resolved is case.resolved and other.module is case.module and other.program is case.program
    assert other.case.shape == (2, 1, 16) and case.case.shape == (2, 13, 16)
    assert other.digest == case.digest  # the same artifact serves both sizes
    assert other.exported is None  # nothing exported again
