"""The mode keys (harness/spec/mode_keys.py): `grad` and its cotangent, `dynamic` and its maximum."""
import pytest

from harness.spec import CaseSpec, SpecError
from harness.spec.mode_keys import DYNAMIC_MAX

LAYER = {"pattern": "layer_norm", "dtype": "float16", "shape": [4, 64]}
INSTANCE = {"pattern": "instance_norm", "dtype": "float16", "shape": [2, 4, 4099]}


def test_a_case_asking_no_mode_is_byte_for_byte_what_it_was():
    spec = CaseSpec.from_dict(LAYER)
    assert not {"grad", "cotangent", "dynamic", "dynamic_max"} & set(spec.to_dict())
    assert spec.case_id == "4a0c9ed24479" and spec.structure_key() == "991cdfda9b12"  # as at 7ce7f05
    assert CaseSpec.from_dict({**LAYER, "grad": False}) == spec


def test_a_gradient_case_draws_a_normal_cotangent_unless_it_names_one():
    spec = CaseSpec.from_dict({**LAYER, "grad": True})
    assert spec.grad and spec.cotangent_dict == {"kind": "normal", "mean": 0.0, "std": 1.0}
    assert spec.case_id != CaseSpec.from_dict(LAYER).case_id and str(spec).endswith("grad normal(mean=0,std=1)")
    other = CaseSpec.from_dict({**LAYER, "grad": True, "cotangent": {"kind": "uniform"}})
    assert other.case_id != spec.case_id
    assert other.structure_key() == spec.structure_key()  # the cotangent's values do not shape what compiles


def test_one_structure_serves_every_size_of_its_dynamic_dims():
    small, big = (CaseSpec.from_dict({**INSTANCE, "shape": [2, 4, n], "dynamic": [2]}) for n in (4099, 70000))
    assert small.structure_key() == big.structure_key() and small.case_id != big.case_id
    assert small.dynamic == (2,) and small.dynamic_max == DYNAMIC_MAX
    assert small.static() == CaseSpec.from_dict(INSTANCE)
    assert CaseSpec.from_dict(INSTANCE).structure_key() != small.structure_key()


def test_a_module_case_takes_both_modes():
    spec = CaseSpec.from_dict({"class": "user_norms:LlamaRMSNorm", "init": {"hidden_size": 64}, "dtype": "bfloat16",
                               "shape": [4, 64], "grad": True, "dynamic": [0]})
    assert spec.to_dict()["grad"] is True and spec.to_dict()["dynamic"] == [0]


@pytest.mark.parametrize("raw, message", [
    ({**LAYER, "grad": 1}, "spec key 'grad': expected true or false, got 1"),
    ({**LAYER, "cotangent": {"kind": "normal"}}, "spec key 'cotangent': only a gradient case"),
    ({**LAYER, "dynamic": [1]}, "spec key 'dynamic': dim 1 sizes the layer_norm module itself"),
    ({**LAYER, "dynamic": [2]}, "spec key 'dynamic': dims must be in [0, 2)"),
    ({**LAYER, "dynamic": [0, 0]}, "spec key 'dynamic': each dim once"),
    ({**LAYER, "dynamic": []}, "spec key 'dynamic': expected a non-empty list"),
    ({**LAYER, "dynamic": [0], "dynamic_max": 3}, "spec key 'dynamic_max': 3 is below the size 4"),
    ({**LAYER, "dynamic_max": 10}, "spec key 'dynamic_max': only a case with symbolic dims"),
    ({**INSTANCE, "dynamic": [1]}, "spec key 'dynamic': dim 1 sizes the instance_norm module itself"),
])
def test_a_bad_mode_key_is_one_line_naming_it(raw, message):
    with pytest.raises(SpecError) as caught:
        CaseSpec.from_dict(raw)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
