"""A catalog entry: its executions, the libraries its module cases import, its note as one paragraph."""
from cases.bug import entry
from harness.core.verdicts import Verdict

LN = {"pattern": "layer_norm", "dtype": "float16", "shape": [2, 64]}
ZOO = {"class": "transformers.models.llama.modeling_llama:LlamaRMSNorm", "init": {"hidden_size": 64},
       "dtype": "float16", "shape": [2, 8, 64]}


def test_an_entry_is_every_spec_on_every_path_and_names_the_libraries_it_imports():
    b = entry("tvm-new-example", None, "t", [LN, {**LN, "dtype": "bfloat16"}], ["tvm", "tvm-decompose"],
              Verdict.INACCURATE, "reproduced", """two
              lines""", controls=[(ZOO, "eager")])
    assert len(b.checks) == 4 and {p for _, p in b.checks} == {"tvm", "tvm-decompose"}
    assert b.note == "two lines" and b.needs == ("transformers",)  # a control's class counts too
    assert entry("tvm-new-other", None, "t", [LN], ["tvm"], Verdict.ERROR, "fixed", "n").needs == ()
