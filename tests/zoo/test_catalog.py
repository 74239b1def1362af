"""The zoo as plain data: entries with members and specs, cached, deterministic."""
import json
import time

import pytest

from harness.zoo.catalog import DTYPES, load_zoo, zoo_specs


def test_the_tiny_zoo_lists_every_norm_once_and_every_block(tiny_models):
    zoo = load_zoo(root=str(tiny_models))
    members = [m for e in zoo.entries for m in e.members]
    assert len(members) == len(set(members)) == zoo.norms == 9
    assert {s.rule for s in zoo.set_aside} == {"name", "base", "block", "no-norm"}
    assert zoo.considered == zoo.norms + len(zoo.set_aside)
    entry = zoo.entry_for("tinylib.models.beta.modeling_beta:BetaRMSNorm")
    assert entry.representative == "tinylib.models.alpha.modeling_alpha:AlphaRMSNorm"
    json.dumps(zoo.to_dict())  # plain data


def test_specs_are_every_dtype_times_normal_and_outlier(tiny_models):
    specs = zoo_specs(root=str(tiny_models))
    with_spec = [e for e in load_zoo(root=str(tiny_models)).entries if e.base]
    assert len(specs) == len(with_spec) * len(DTYPES) * 2
    assert {s["input"]["kind"] for s in specs} == {"normal", "outlier"}
    assert {s["dtype"] for s in specs} == set(DTYPES)
    assert all(s["seed"] == 0 and s["params"]["kind"] in ("normal", "ones") for s in specs)


def test_the_zoo_is_cached_until_a_file_changes(tiny_models):
    first = load_zoo(root=str(tiny_models))
    assert load_zoo(root=str(tiny_models)) is first
    path = tiny_models / "beta" / "modeling_beta.py"
    path.write_text(path.read_text() + "\n\nclass BetaExtraRMSNorm(BetaOtherRMSNorm):\n    pass\n")
    again = load_zoo(root=str(tiny_models))
    assert again is not first and again.norms == first.norms + 1


def test_transformers_specs_are_deterministic_and_fast():
    pytest.importorskip("transformers", reason="the zoo reads transformers: pip install 'normdiff[zoo]'")
    specs = zoo_specs()
    t0 = time.perf_counter()
    assert zoo_specs() == specs and load_zoo() is load_zoo()
    assert time.perf_counter() - t0 < 1.0  # cached in-process (a cold read is seconds)
    classes = {s["class"] for s in specs}
    assert "transformers.models.llama.modeling_llama:LlamaRMSNorm" in classes
    assert all(s["class"].startswith("transformers.models.") for s in specs)


def test_members_index_reads_the_library_only_when_a_class_asked_about_is_in_it():
    """A report of a user's classes only (every module-case test's `normdiff run`) gets {} without reading
    transformers, the answer the whole index gives for them (a class outside the zoo stands for itself); one
    transformers class among them and the whole index is read."""
    pytest.importorskip("transformers", reason="the zoo reads transformers: pip install 'normdiff[zoo]'")
    from harness.zoo.catalog import members_index

    full = members_index()
    mine = ["user_norms:LlamaRMSNorm", "tinylib.models.alpha.modeling_alpha:AlphaRMSNorm", "transformers_fork:Norm"]
    assert members_index(mine) == {} and not set(mine) & set(full)
    llama = "transformers.models.llama.modeling_llama:LlamaRMSNorm"
    assert members_index([*mine, llama]) == full and llama in full[llama] and len(full[llama]) > 1
