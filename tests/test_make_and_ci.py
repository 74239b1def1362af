"""The Makefile and .ci/run: extras installed on request (the stamp notices other extras), the
nightly target's run history named, and this repository's CI installing the Ray and zoo extras."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib

import pytest

from harness.commands.main import build_parser
from helpers import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def make(folder, *args) -> subprocess.CompletedProcess:
    """make in `folder` as a user types it: without the variables of a make that runs these tests
    (`make test EXTRAS=…` hands EXTRAS to every make below it through MAKEFLAGS and the environment)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "EXTRAS")}
    return subprocess.run(["make", "--no-print-directory", "-C", str(folder), *args], capture_output=True,
                          text=True, timeout=60, env=env)


@pytest.fixture
def checkout(tmp_path):
    """The Makefile and pyproject.toml alone, with a stand-in .venv: make decides, nothing is installed."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(os.path.join(ROOT, name), tmp_path / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    return tmp_path


def stamp(folder, extras=""):
    """Mark the venv installed with `extras` the way the Makefile's own recipe does (its last line)."""
    lines = make(folder, "-n", "install", *([f"EXTRAS={extras}"] if extras else [])).stdout.splitlines()
    assert lines[-1].startswith("touch "), lines
    subprocess.run(shlex.split(lines[-1]), cwd=folder, check=True)


def test_extras_are_installed_on_request_and_a_change_of_extras_installs_again(checkout):
    plain = make(checkout, "-n", "install").stdout
    assert "-e '.'" in plain
    assert make(checkout, "-q", "install").returncode == 1  # nothing installed yet
    stamp(checkout)
    assert make(checkout, "-q", "install").returncode == 0
    # other extras: the stamp of the plain install does not stand for them
    assert make(checkout, "-q", "install", "EXTRAS=ray,zoo").returncode == 1
    wanted = make(checkout, "-n", "install", "EXTRAS=ray,zoo").stdout
    assert "pip install" in wanted and "-e '.[ray,zoo]'" in wanted
    stamp(checkout, "ray")
    assert make(checkout, "-q", "install", "EXTRAS=ray").returncode == 0
    assert make(checkout, "-q", "install", "EXTRAS=zoo").returncode == 1
    stamp(checkout, "ray,zoo")
    assert make(checkout, "-q", "install", "EXTRAS=ray,zoo").returncode == 0
    # an install with extras stands for the plain one and each extra alone (make bench after EXTRAS=ray,zoo)
    assert make(checkout, "-q", "install", "EXTRAS=zoo").returncode == 0
    assert make(checkout, "-q", "install").returncode == 0
    # a changed pyproject.toml installs again, whatever the extras
    future = os.stat(checkout / ".venv").st_mtime + 10
    os.utime(checkout / "pyproject.toml", (future, future))
    assert make(checkout, "-q", "install", "EXTRAS=ray,zoo").returncode == 1
    assert make(checkout, "-q", "install").returncode == 1


def test_the_extras_ci_installs_exist_and_keep_torch_the_pinned_one():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        project = tomllib.load(fh)["project"]
    extras = project["optional-dependencies"]
    assert extras["ray"] == ["ray[default]>=2.60,<3"] and extras["zoo"] == ["transformers==5.23.0"]
    assert not any(re.match(r"torch\b", d) for deps in extras.values() for d in deps)  # torch: the pin alone
    assert "torch==2.13.0" in project["dependencies"]


def test_ci_runs_the_tests_with_the_ray_and_zoo_extras_and_fails_without_ray():
    text = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
    (last,) = [line for line in text.splitlines() if line.startswith("make ")]
    argv = shlex.split(last)
    assert argv[1] == "test" and "EXTRAS=ray,zoo" in argv[2:]
    assert re.search(r"^export NORMDIFF_REQUIRE_RAY=1$", text, re.M)  # tests/engine/test_ray.py: a missing Ray fails
    assert subprocess.run(["bash", "-n", os.path.join(ROOT, ".ci", "run")]).returncode == 0


# A test file that imports what Inductor imports (torch.utils.mkldnn: torch.jit.script_method's
# DeprecationWarning, once per method) and deprecates something of its own.
TINY_TEST = """import warnings

import torch.utils.mkldnn


def test_ours():
    warnings.warn("a deprecation of our own", DeprecationWarning)
"""


def test_make_tests_output_opens_without_torchs_deprecation_warnings(checkout, tmp_path):
    """`make test`'s pytest command, with this repository's pytest configuration, on one tiny test file: no
    DeprecationWarning before its first result line, none of torch's anywhere, and ours still reported."""
    stamp(checkout)
    (recipe,) = [ln for ln in make(checkout, "-n", "test", "JOBS=1").stdout.splitlines() if " -m pytest " in ln]
    args = shlex.split(recipe.split(" -m pytest ", 1)[1])
    assert "-n" in args  # as the Makefile runs it: in pytest-xdist's worker processes
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "test_tiny.py").write_text(TINY_TEST)
    r = subprocess.run([sys.executable, "-m", "pytest", *args, "-c", os.path.join(ROOT, "pyproject.toml"),
                        "--rootdir", str(tmp_path / "tiny"), "-p", "no:cacheprovider", str(tmp_path / "tiny")],
                       cwd=tmp_path / "tiny", capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("."))
    assert not any("DeprecationWarning" in ln for ln in lines[:first] + r.stderr.splitlines()), r.stdout + r.stderr
    assert "script_method" not in r.stdout + r.stderr
    assert "DeprecationWarning: a deprecation of our own" in r.stdout  # the filter is torch's alone


# A test file that starts real workers for an ExecuTorch path: the forkserver imports executorch.exir, whose import
# warns (importlib.resources' read_text/open_text) and logs (torchao's register_constant on an Enum) on stderr.
WORKER_TEST = """from harness.engine.pool import Pool
from harness.spec import CaseSpec


def test_workers_start():
    spec = CaseSpec.from_dict({"pattern": "rms_norm", "dtype": "float32", "shape": [2, 8]})
    with Pool(["executorch-recompose", "eager"], timeout=300) as pool:
        assert pool.submit(spec, "eager")["verdict"] == "pass"


def test_next():
    pass
"""


def test_make_tests_output_holds_no_line_of_a_workers_libraries(checkout, tmp_path):
    """`make test`'s pytest command, its output uncaptured (-s), on a test starting real workers whose forkserver
    imports ExecuTorch: a worker's stderr is its log (a crash record's log_tail), not the terminal."""
    stamp(checkout)
    (recipe,) = [ln for ln in make(checkout, "-n", "test", "JOBS=1").stdout.splitlines() if " -m pytest " in ln]
    args = shlex.split(recipe.split(" -m pytest ", 1)[1])
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "test_workers.py").write_text(WORKER_TEST)
    r = subprocess.run([sys.executable, "-m", "pytest", *args, "-s", "-c", os.path.join(ROOT, "pyproject.toml"),
                        "--rootdir", str(tmp_path / "tiny"), "-p", "no:cacheprovider", str(tmp_path / "tiny")],
                       cwd=tmp_path / "tiny", capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr
    said = r.stdout + r.stderr
    for word in ("DeprecationWarning", "register_constant", "torchao", "Warning:"):
        assert word not in said, said


def normdiff_argvs(shell: str) -> list[list[str]]:
    """Each `.venv/bin/normdiff …` command of a recipe, as its arguments (up to its `||`, `;`, `&&` or `}`)."""
    return [shlex.split(m) for m in re.findall(r"\.venv/bin/normdiff ((?:[^|;&}])*)", shell)]


def test_make_nightly_runs_every_suite_as_one_run_into_their_own_folders_and_gates_each(checkout):
    """One run of every suite (the workers' start paid once), each suite written into reports/<suite>/, the
    history named, every baseline given to the run (known failures not attributed again), then one gate a
    suite against its own baseline."""
    stamp(checkout)
    argvs = normdiff_argvs(make(checkout, "-n", "nightly").stdout)
    calls = [build_parser().parse_args([a for a in argv if a != "$zoo"]) for argv in argvs]  # the zoo's, at run time
    assert [c.command for c in calls] == ["run"] + ["gate"] * 5  # the zoo's gate when its extra is there
    run = calls[0]
    assert run.per_suite and run.out == "reports" and run.history == "reports/history.sqlite"
    assert run.suite == ["nightly", "context", "shapes", "gradients"]  # the zoo's added when its extra is there
    assert "--suite zoo --baseline reports/zoo-baseline.json" in make(checkout, "-n", "nightly").stdout
    baselines = ["reports/baseline.json"] + [f"reports/{s}-baseline.json" for s in ("context", "shapes", "gradients")]
    assert run.baseline == baselines
    assert [(c.results, c.baseline) for c in calls[1:]] == [
        ("reports/nightly/results.jsonl", "reports/baseline.json"),
        *[(f"reports/{s}/results.jsonl", f"reports/{s}-baseline.json") for s in ("context", "shapes", "gradients")],
        ("reports/zoo/results.jsonl", "reports/zoo-baseline.json")]


def test_make_fuzz_runs_both_searches_and_a_finding_is_not_a_failure(checkout):
    """Random exploration lives in make fuzz (make test is derandomized): the catalog search, then the program
    search, into folders of their own; exit 1 (found) passes, exit 2 (could not search) fails."""
    stamp(checkout)
    shell = make(checkout, "-n", "fuzz").stdout
    calls = [build_parser().parse_args(argv) for argv in normdiff_argvs(shell)]
    assert [(c.command, c.programs) for c in calls] == [("fuzz", False), ("fuzz", True)]
    assert len({c.out for c in calls}) == 2 and shell.count("|| [ $? -eq 1 ]") == 2
    bin_ = checkout / ".venv" / "bin"
    for code, ok in ((1, True), (2, False)):
        (bin_ / "normdiff").write_text(f"#!/bin/sh\nexit {code}\n")
        (bin_ / "normdiff").chmod(0o755)
        assert (make(checkout, "fuzz").returncode == 0) == ok


# normdiff as the nightly's recipe sees it: each call logged, the ones matching FAIL exit with its code
STAND_IN = """#!/bin/sh
echo "$1 $2" >> "$(dirname "$0")/calls"
case "$*" in {fail}) exit {code};; esac
exit 0
"""


GATES = ["gate reports/nightly/results.jsonl", "gate reports/context/results.jsonl",
         "gate reports/shapes/results.jsonl", "gate reports/gradients/results.jsonl"]
NIGHT = ["run --per-suite"] + GATES


@pytest.mark.parametrize("fail, code, zoo, calls, ok", [
    ("nothing", 1, True, NIGHT + ["gate reports/zoo/results.jsonl"], True),
    ("gate reports/nightly/*", 1, True, NIGHT + ["gate reports/zoo/results.jsonl"], False),
    ("gate reports/context/*", 1, True, NIGHT + ["gate reports/zoo/results.jsonl"], False),
    ("gate reports/shapes/*", 1, True, NIGHT + ["gate reports/zoo/results.jsonl"], False),
    ("gate reports/gradients/*", 1, True, NIGHT + ["gate reports/zoo/results.jsonl"], False),
    ("gate reports/zoo/*", 1, True, NIGHT + ["gate reports/zoo/results.jsonl"], False),
    ("run *", 2, True, ["run --per-suite"], False),  # no run made: no gate of stale results
    ("gate reports/nightly/*", 1, False, NIGHT, False),
])
def test_make_nightly_gates_every_suite_whatever_the_gate_before_says_and_fails_with_any(
        checkout, fail, code, zoo, calls, ok):
    """A night with a regression in the nightly suite still gates the context, shapes, gradients and zoo suites;
    the target fails when any gate fails or the run cannot be made (exit 2), as a CI job should; exit 1 of the
    run (some verdict is not pass) is the gates' to judge."""
    stamp(checkout)
    bin_ = checkout / ".venv" / "bin"
    (bin_ / "normdiff").write_text(STAND_IN.format(fail=fail.replace(" ", "\\ "), code=code))
    (bin_ / "python").write_text(f"#!/bin/sh\nexit {0 if zoo else 1}\n")  # the zoo extra's check
    for name in ("normdiff", "python"):
        (bin_ / name).chmod(0o755)
    r = make(checkout, "nightly")
    assert (bin_ / "calls").read_text().splitlines() == calls, r.stderr
    assert (r.returncode == 0) == ok, r.stderr
