"""`normdiff lift` prints a class's lifted program as a ready program spec, which gives the module case's
verdicts; `run --class` runs a module case without a file."""
import json
import os

import pytest

from harness.engine.execute import Executor
from harness.spec import CaseSpec
from helpers import ROOT

ENV = {"PYTHONPATH": os.path.join(ROOT, "tests")}  # the user's folder of classes on PYTHONPATH


def printed(r) -> dict:
    """The program spec `normdiff lift` printed."""
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("cls, init, keys", [
    ("user_norms:LlamaRMSNorm", {"hidden_size": 64}, ["--dtype", "float16", "--params", "normal"]),
    ("user_norms:ZeroCenteredRMSNorm", {"dim": 64}, ["--dtype", "bfloat16"]),
    ("user_norms:ChannelsFirstLayerNorm", {"channels": 16}, ["--dtype", "float32", "--shape", "2,16,4,4"]),
    ("user_norms:GatedRMSNorm", {"hidden_size": 64}, ["--dtype", "float16", "--inputs", '{"gate": {"kind": "normal"}}']),
    ("user_norms:FusedAddRMSNorm", {"hidden_size": 64},  # two outputs: the lifted program returns both
     ["--dtype", "bfloat16", "--params", "normal", "--inputs", '{"residual": {"kind": "normal"}}']),
])
def test_the_lifted_spec_gives_the_module_cases_verdicts_and_bits(cli_here, cls, init, keys):
    """Lifted in this process (--jobs 0), where the executor below runs the class too; the lift in a
    worker of a fresh interpreter, as users run it, is the next tests'."""
    spec = printed(cli_here("lift", cls, "--init", json.dumps(init), *keys, "--jobs", "0"))
    program = CaseSpec.from_dict(spec)
    assert program.style == "program" and program.program
    raw = {"class": cls, "init": init, "dtype": spec["dtype"], "shape": spec["shape"]}
    if "--params" in keys:
        raw["params"] = {"kind": "normal"}
    if "--inputs" in keys:
        raw["inputs"] = json.loads(keys[keys.index("--inputs") + 1])
    module = CaseSpec.from_dict(raw)
    executor = Executor()
    for path in ("eager", "executorch-recompose"):
        a, b = executor.execute(module, path), executor.execute(program, path)
        assert (a["verdict"], a["max_abs_err"], a["out_dtype"]) == (b["verdict"], b["max_abs_err"], b["out_dtype"])
        each = [[(o["verdict"], o["max_abs_err"]) for o in r.get("outputs", ())] for r in (a, b)]
        assert each[0] == each[1]  # each output alike (named by position in one, by the program in the other)


def test_the_zero_centered_weight_is_kept_as_a_fill(cli):
    spec = printed(cli("lift", "user_norms:ZeroCenteredRMSNorm", "--init", '{"dim": 8}', "--shape", "2", "8", env=ENV))
    assert spec["params"] == {"kind": "fill", "values": {"weight": 0.0}}


def test_a_class_outside_the_language_is_one_line_naming_the_op_and_the_class(cli):
    r = cli("lift", "user_norms:CumulativeNorm", env=ENV)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "cumprod" in r.stderr and "user_norms:CumulativeNorm" in r.stderr


def test_run_class_runs_a_module_case_without_a_file(cli, tmp_path):
    out = tmp_path / "out"
    r = cli("run", "--class", "user_norms:GatedRMSNorm", "--init", '{"hidden_size": 64}', "--dtype", "float32",
            "--inputs", '{"gate": {"kind": "normal"}}', "--paths", "eager", "--out", str(out), "--no-history",
            env=ENV)
    assert r.returncode == 0, r.stderr
    (rec,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rec["case"]["class"] == "user_norms:GatedRMSNorm" and rec["verdict"] == "pass"
    assert "F.silu(" in rec["program"] and rec["lift_check"] is not None and rec["lift_check"] < 1e-12
