"""Building a module case's class from its spec: one line naming the class when it cannot be built."""
import pytest
import torch

from harness.modules.load import ModuleSpecError, build, forward_names
from harness.spec import CaseSpec


def spec(cls, **keys):
    return CaseSpec.from_dict({"class": cls, "dtype": "float16", "shape": [2, 4, 32], **keys})


@pytest.mark.parametrize("cls, init, words", [
    ("no_such_package.norms:RMSNorm", {}, "cannot import no_such_package.norms"),
    ("user_norms:NoSuchNorm", {}, "user_norms has no class 'NoSuchNorm'"),
    ("user_norms:Config", {}, "not a torch.nn.Module subclass"),
    ("user_norms:LlamaRMSNorm", {"size": 3}, "its constructor rejects init ['size']"),
    ("user_norms:ConfiguredRMSNorm", {"config": {"class": "user_norms:Nope"}}, "user_norms has no config class"),
])
def test_a_class_that_cannot_be_built_is_one_line_naming_it(cls, init, words):
    with pytest.raises(ModuleSpecError) as info:
        build(spec(cls, init=init))
    assert words in str(info.value) and cls.split(":")[0] in str(info.value) and "\n" not in str(info.value)


def test_the_module_goes_to_weight_dtype_and_a_config_is_built_from_its_fields():
    module = build(spec("user_norms:ConfiguredRMSNorm", init={"config": {"class": "user_norms:Config",
                                                                           "hidden_size": 32}},
                        weight_dtype="float32"))
    assert module.weight.dtype == torch.float32 and module.weight.shape == (32,) and not module.training


def test_a_constructor_that_draws_draws_the_same_values_every_time():
    s = spec("user_norms:AdaptiveLayerNorm", init={"dim": 32, "cond_dim": 8},
             inputs={"cond": {"kind": "normal", "shape": [2, 8]}})
    a, b = build(s), build(s)
    assert torch.equal(a.linear.weight, b.linear.weight)
    assert not torch.equal(a.linear.weight, build(CaseSpec.from_dict({**s.to_dict(), "seed": 1})).linear.weight)


def test_inputs_must_name_the_forwards_parameters():
    module = build(spec("user_norms:GatedRMSNorm", init={"hidden_size": 32}))
    assert forward_names(module, spec("user_norms:GatedRMSNorm", inputs={"gate": {"kind": "normal"}})) == \
        ("hidden_states", "gate")
    with pytest.raises(ModuleSpecError, match="forward has no parameter 'gat'"):
        forward_names(module, spec("user_norms:GatedRMSNorm", inputs={"gat": {"kind": "normal"}}))
    adaptive = build(spec("user_norms:AdaptiveLayerNorm", init={"dim": 32, "cond_dim": 8}))
    with pytest.raises(ModuleSpecError, match="forward requires 'cond'"):
        forward_names(adaptive, spec("user_norms:AdaptiveLayerNorm"))


def test_an_instance_is_the_submodule_of_the_model_built_as_the_model_is():
    """A norm instance of a whole model (docs/models.md): the model built (a factory too), moved, then taken apart."""
    raw = {"class": "user_models:tiny_mixer", "init": {"width": 8}, "dtype": "float16", "shape": [2, 4, 8]}
    norm = build(CaseSpec.from_dict({**raw, "instance": "norm_in"}))
    assert isinstance(norm, torch.nn.LayerNorm) and norm.weight.dtype == torch.float16
    proj = build(CaseSpec.from_dict({**raw, "instance": "proj"}), factory=True)
    again = build(CaseSpec.from_dict({**raw, "instance": "proj"}))
    assert torch.equal(proj.weight, again.weight)  # the model's seeded draw: the same weights every time
    with pytest.raises(ModuleSpecError, match="has no submodule 'nowhere'"):
        build(CaseSpec.from_dict({**raw, "instance": "nowhere"}))
    with pytest.raises(ModuleSpecError, match="not a torch.nn.Module subclass"):
        build(CaseSpec.from_dict(raw))  # a factory only for a whole model or an instance of one
