"""A norm's model config class, found by annotation or by name, with its fields."""
from harness.zoo import corpus
from harness.zoo.classes import ref_of
from harness.zoo.configs import NO_DEFAULT, config_of


def test_the_annotation_names_the_config_class_and_its_fields(tiny_models):
    c = corpus.load(root=str(tiny_models))
    cc, how = config_of(ref_of(c, "tinylib.models.alpha.modeling_alpha.AlphaConfigRMSNorm"))
    assert how == "annotation"
    assert cc.target == "tinylib.models.alpha.configuration_alpha:AlphaConfig"
    assert cc.fields["hidden_size"] == 512 and cc.fields["num_attention_heads"] == 8
    assert cc.default("nothing") is NO_DEFAULT


def test_without_an_annotation_the_longest_name_prefix_wins(tiny_models):
    c = corpus.load(root=str(tiny_models))
    cc, how = config_of(ref_of(c, "tinylib.models.alpha.modeling_alpha.AlphaRMSNorm"))
    assert how == "name prefix" and cc.target.endswith(":AlphaConfig")


def test_no_config_file_is_a_reason(tiny_models):
    c = corpus.load(root=str(tiny_models))
    cc, why = config_of(ref_of(c, "tinylib.models.beta.modeling_beta.BetaRMSNorm"))
    assert cc is None and "configuration_beta.py" in why
