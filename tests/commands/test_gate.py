"""`normdiff gate` on a machine without a baseline entry's package (the zoo extra's transformers): the entry is set
aside in one line, not MISSING, and `--update` keeps it."""
import json

from harness.spec import CaseSpec
from helpers import SPECS, entry, record, write_baseline, write_results

ABSENT = "normdiff_absent_zoo.models:LayerNorm"  # a class of a package no machine installs


def class_entry(source: str) -> dict:
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "style": "class", "class": source,
                               "init": {"normalized_shape": 64}, "dtype": "float16", "shape": [2, 64]})
    return {"case_id": spec.case_id, "path": "tvm-decompose", "verdict": "inaccurate", "upstream": "new",
            "reason": "a zoo class's float16 layer norm", "case": spec.to_dict()}


def test_an_entry_whose_class_is_not_installed_is_not_judged_and_update_keeps_it(cli_here, tmp_path):
    results = write_results(tmp_path, [record("a", "eager", "pass"), record("b", "tvm-decompose", "inaccurate")])
    absent = class_entry(ABSENT)
    base = write_baseline(tmp_path, [entry("b", "tvm-decompose", "inaccurate"), absent])
    r = cli_here("gate", results, "--baseline", base)
    assert r.returncode == 0, r.stderr
    assert ("1 baseline entries not judged: their classes' packages are not installed (normdiff_absent_zoo)"
            in r.stderr)
    assert "0 MISSING" in " ".join(r.stderr.split())
    u = cli_here("gate", results, "--baseline", base, "--update")
    assert u.returncode == 0 and "0 added, 0 removed" in u.stderr, u.stderr
    kept = json.loads(open(base).read())["entries"]
    assert {e["case_id"] for e in kept} == {SPECS["b"].case_id, absent["case_id"]}


def test_an_entry_of_an_installed_class_not_run_is_still_missing(cli_here, tmp_path):
    installed = class_entry("torch.nn:LayerNorm")
    results = write_results(tmp_path, [record("b", "tvm-decompose", "inaccurate")])
    r = cli_here("gate", results, "--baseline", write_baseline(tmp_path, [entry("b", "tvm-decompose", "inaccurate"),
                                                                           installed]))
    assert r.returncode == 1 and "normdiff gate: MISSING tvm-decompose" in r.stderr
