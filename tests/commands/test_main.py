"""The command line as users call it: one-line errors, results and reports."""
import json
import os

import pytest

from harness.core.records import read_results

RECORD_KEYS = {"case_id", "case", "path", "verdict", "stage", "message", "max_abs_err", "max_rel_err",
               "max_ulp", "worst_row", "eager_max_abs_err", "out_dtype", "expected_dtype", "seconds",
               "versions"}


def write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return str(p)


@pytest.mark.parametrize("spec, words", [
    ({"pattern": "layer_norm", "dtype": "float16", "shape": [1, 8], "colour": "red"}, "'colour'"),
    ({"pattern": "layer_norm", "dtype": "float16", "shape": [2, 8], "layout": "channels_last"}, "'layout'"),
    ("{not json", "not valid JSON"),
])
def test_bad_spec_is_one_line_and_exit_2(cli_here, tmp_path, spec, words):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.jsonl").write_text('{"kept": true}\n')
    r = cli_here("run", "--case", write(tmp_path, "bad.json", spec), "--paths", "eager", "--out", str(out))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and words in r.stderr and "Traceback" not in r.stderr
    assert (out / "results.jsonl").read_text() == '{"kept": true}\n'  # nothing already written is lost


@pytest.mark.parametrize("args, words", [
    (["run", "--paths", "eager,nosuch"], "unknown path 'nosuch'"),
    (["run", "--suite", "nosuch"], "unknown suite"),
    (["run", "--shard", "3/2"], "--shard"),
    (["run", "--case", "/nonexistent.json"], "cannot read"),
    (["frobnicate"], "invalid choice"),
    ([], "a command is required"),
])
def test_bad_usage_is_one_line_and_exit_2(cli_here, args, words):
    r = cli_here(*args)
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_bad_usage_from_a_fresh_interpreter_is_one_line_and_exit_2(cli):
    """The tests above read the arguments in this process; `python -m harness` ends the same way."""
    r = cli("run", "--paths", "eager,nosuch")
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("normdiff: error: --paths: unknown path 'nosuch'")


def test_a_command_is_read_by_its_own_parser_alone_as_by_the_whole_command_line():
    """main() builds the parser of the command it is given only, importing that command's module alone (a
    start without fuzz's hypothesis or the bugs catalog); it reads the arguments as the whole parser does,
    whose list holds every command."""
    import argparse
    import ast
    import importlib
    import subprocess
    import sys

    from harness.commands.main import COMMANDS, build_parser
    from helpers import ROOT

    argv = ["run", "--suite", "smoke", "--paths", "eager", "--jobs", "1", "--out", "o"]
    assert vars(build_parser("run").parse_args(argv)) == vars(build_parser().parse_args(argv))
    assert set(build_parser()._subparsers._group_actions[0].choices) == {c for cs in COMMANDS.values() for c in cs}
    for module, commands in COMMANDS.items():  # each module adds exactly the commands COMMANDS names for it
        parser = argparse.ArgumentParser()
        importlib.import_module(f"harness.commands.{module}").add_command(parser.add_subparsers())
        assert tuple(parser._subparsers._group_actions[0].choices) == commands, module
    probe = ("import sys; from harness.commands.main import build_parser; build_parser('run'); "
             "print(sorted(m for m in sys.modules if m.startswith('harness.commands.')))")
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = set(ast.literal_eval(r.stdout))
    assert "harness.commands.run" in loaded and not loaded & {"harness.commands.fuzz", "harness.commands.bugs"}


@pytest.mark.xdist_group("smoke_on_eager")  # the session's one run of smoke on eager (conftest.py)
def test_run_smoke_on_eager_writes_results_and_summary(smoke_on_eager, cli_here):
    out, r = smoke_on_eager
    assert r.returncode in (0, 1), r.stderr
    records = read_results(str(out / "results.jsonl"))
    cases = [json.loads(line) for line in cli_here("cases", "--suite", "smoke").stdout.splitlines()]
    assert len(records) == len(cases) >= 25
    for rec in records:
        assert RECORD_KEYS <= set(rec) and rec["path"] == "eager"
        assert rec["versions"]["torch"].startswith("2.13")
        assert rec["verdict"] in ("pass", "inaccurate") and rec["message"]
    # the eager path passes every smoke case except patterns eager itself is unstable on
    unstable = [rec for rec in records if rec["verdict"] != "pass"]
    assert all(rec["unstable"] for rec in unstable)
    assert sum(rec["verdict"] == "pass" for rec in records) >= len(records) - 2
    assert r.returncode == (1 if unstable else 0)
    summary = (out / "summary.md").read_text()
    assert "| eager |" in summary and "layer_norm" in summary


def test_run_case_file_on_eager_passes_the_seed(cli, tmp_path):
    seed = {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
            "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0}}
    out = tmp_path / "out"
    r = cli("run", "--case", write(tmp_path, "seed.json", seed), "--paths", "eager", "--out", str(out), "--jobs", "0")
    assert r.returncode == 0, r.stderr
    (rec,) = read_results(str(out / "results.jsonl"))
    assert rec["verdict"] == "pass" and rec["out_dtype"] == "float16"
    assert os.path.exists(out / "summary.md")
