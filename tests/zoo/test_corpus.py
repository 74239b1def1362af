"""Reading a library's modeling files without importing them."""
import sys

import pytest

from harness.zoo import corpus


def test_a_folder_is_read_with_dotted_names_and_never_imported(tiny_models):
    c = corpus.load(root=str(tiny_models))
    assert sorted(c.modules) == ["tinylib.models.alpha.modeling_alpha", "tinylib.models.beta.modeling_beta"]
    assert c.sys_path == str(tiny_models.parent.parent)
    assert "tinylib" not in sys.modules


def test_a_class_is_parsed_from_its_own_lines_even_with_a_column_zero_docstring(tiny_models):
    mod = corpus.load(root=str(tiny_models)).modules["tinylib.models.alpha.modeling_alpha"]
    node = mod.classes["AlphaRMSNorm"]
    assert node.name == "AlphaRMSNorm"
    assert [f.name for f in node.body] == ["__init__", "forward"]
    assert "AlphaSleepyRMSNorm" in mod.classes and "Missing" not in mod.classes


def test_names_resolve_through_relative_and_aliased_imports(tiny_models):
    c = corpus.load(root=str(tiny_models))
    beta = c.modules["tinylib.models.beta.modeling_beta"]
    assert beta.resolve("AlphaRMSNorm") == "tinylib.models.alpha.modeling_alpha.AlphaRMSNorm"
    assert beta.resolve("nn.Module") == "torch.nn.Module"
    assert beta.resolve("BetaRMSNorm") == "tinylib.models.beta.modeling_beta.BetaRMSNorm"
    alpha = c.modules["tinylib.models.alpha.modeling_alpha"]
    assert alpha.resolve("GradientCheckpointingLayer") == "tinylib.modeling_layers.GradientCheckpointingLayer"
    assert beta.generated and not alpha.generated


def test_modular_files_count_the_classes_they_copy_from(tiny_models):
    assert corpus.load(root=str(tiny_models)).copied["AlphaRMSNorm"] == 1


def test_an_installed_package_is_found_without_importing_it(tiny_library, monkeypatch):
    monkeypatch.syspath_prepend(str(tiny_library))
    assert corpus.package_dir("tinylib") == str(tiny_library / "tinylib")
    assert corpus.package_dir("tinylib.models") == str(tiny_library / "tinylib" / "models")
    c = corpus.load(package="tinylib")
    assert c.library == "tinylib" and len(c.modules) == 2
    assert "tinylib" not in sys.modules


@pytest.mark.parametrize("kwargs, words", [
    ({"package": "no_such_package_here"}, "is not installed"),
    ({"root": "/no/such/folder"}, "no such folder"),
])
def test_what_cannot_be_read_is_one_line(kwargs, words):
    with pytest.raises(corpus.CorpusError, match=words):
        corpus.load(**kwargs)


def test_a_folder_without_modeling_files_is_one_line(tmp_path):
    with pytest.raises(corpus.CorpusError, match="no modeling_"):
        corpus.load(root=str(tmp_path))
