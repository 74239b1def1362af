"""Module cases are resolved on the workers before any path runs: a bad class stops the run with one line
before anything is written; inside a suite a class outside the language, a crash or a hang costs its
executions, not the run."""
import json
import os

from helpers import ROOT

ENV = {"PYTHONPATH": os.path.join(ROOT, "tests")}


def write(tmp_path, name, *specs):
    p = tmp_path / name
    p.write_text("".join(json.dumps({"dtype": "float32", "shape": [2, 16], **s}) + "\n" for s in specs))
    return str(p)


def records(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_a_class_that_cannot_be_built_stops_the_run_before_anything_is_written(cli, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text('{"kept": true}\n')
    for spec, words in (({"class": "user_norms:Nope"}, "user_norms has no class 'Nope'"),
                        ({"class": "user_norms:LlamaRMSNorm", "init": {"size": 2}}, "rejects init ['size']")):
        r = cli("run", "--case", write(tmp_path, "bad.json", spec), "--paths", "eager", "--out", str(out),
                "--no-history", env=ENV)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and words in r.stderr
        assert (out / "results.jsonl").read_text() == '{"kept": true}\n'


def test_one_case_outside_the_language_exits_2_and_inside_a_suite_it_is_unsupported(cli, tmp_path):
    cum = {"class": "user_norms:CumulativeNorm"}
    r = cli("run", "--case", write(tmp_path, "one.json", cum), "--paths", "eager", "--out", str(tmp_path / "a"),
            "--no-history", env=ENV)
    assert r.returncode == 2 and "cumprod" in r.stderr and "user_norms:CumulativeNorm" in r.stderr
    llama = {"class": "user_norms:LlamaRMSNorm", "init": {"hidden_size": 16}}
    out = tmp_path / "b"
    r = cli("run", "--case", write(tmp_path, "suite.jsonl", cum, llama, {"class": "user_norms:CrashingNorm"}),
            "--paths", "eager,tvm", "--out", str(out), "--no-history", env=ENV)
    assert r.returncode == 1, r.stderr
    got = {(rec["case"]["class"], rec["path"]): rec for rec in records(out)}
    assert len(got) == 6
    for path in ("eager", "tvm"):
        assert got[("user_norms:CumulativeNorm", path)]["verdict"] == "unsupported"
        assert "cumprod" in got[("user_norms:CumulativeNorm", path)]["message"]
        crash = got[("user_norms:CrashingNorm", path)]
        assert crash["verdict"] == "crash" and crash["stage"] == "lift" and "SIGSEGV" in crash["message"]
        assert got[("user_norms:LlamaRMSNorm", path)]["verdict"] == "pass"


def test_a_class_that_hangs_while_it_is_built_times_out_as_its_executions(cli, tmp_path):
    out = tmp_path / "out"
    r = cli("run", "--case", write(tmp_path, "s.jsonl", {"class": "user_norms:HangingNorm"},
                                   {"class": "user_norms:LlamaRMSNorm", "init": {"hidden_size": 16}}),
            "--paths", "eager", "--out", str(out), "--timeout", "12", "--no-history", env=ENV)
    assert r.returncode == 1, r.stderr
    got = {rec["case"]["class"]: rec for rec in records(out)}
    assert got["user_norms:HangingNorm"]["verdict"] == "timeout" and got["user_norms:HangingNorm"]["stage"] == "lift"
    assert got["user_norms:LlamaRMSNorm"]["verdict"] == "pass"


def test_a_class_that_outgrows_the_memory_limit_costs_its_executions_not_the_run(cli, tmp_path):
    out = tmp_path / "out"
    hungry = {"class": "user_norms:HungryNorm", "init": {"hidden_size": 16}}
    others = [{"class": "user_norms:LlamaRMSNorm", "init": {"hidden_size": 16}},
              {"class": "user_norms:ZeroCenteredRMSNorm", "init": {"dim": 16}},
              {"class": "user_norms:GatedRMSNorm", "init": {"hidden_size": 16}, "inputs": {"gate": {"kind": "normal"}}}]
    r = cli("run", "--case", write(tmp_path, "s.jsonl", others[0], hungry, *others[1:]), "--paths", "eager",
            "--out", str(out), "--jobs", "1", "--max-memory", "3", "--no-cache", "--no-history", env=ENV)
    assert r.returncode == 1, r.stderr
    got = {rec["case"]["class"]: rec for rec in records(out)}
    assert len(got) == 4
    oom = got["user_norms:HungryNorm"]
    assert oom["verdict"] == "error" and oom["stage"] == "lift", oom
    assert "ran out of memory" in oom["message"] and "memory limit of 3 GB (--max-memory)" in oom["message"]
    assert oom["memory_limit_gb"] == 3.0
    assert all(got[s["class"]]["verdict"] == "pass" for s in others)
    # the same class given an init its constructor rejects stays a bad spec: one line, exit 2
    r = cli("run", "--case", write(tmp_path, "bad.json", {"class": "user_norms:HungryNorm", "init": {"size": 2}}),
            "--paths", "eager", "--out", str(tmp_path / "bad"), "--no-history", env=ENV)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "rejects init ['size']" in r.stderr
