"""Fixtures for every test; the shared helpers themselves live in helpers.py."""
import os
import shutil
import tempfile

import pytest
from hypothesis import settings

import zoo_library
from helpers import ROOT, normdiff, normdiff_here

# `make test` draws the same hypothesis examples on every run of a commit: each @given test derives its
# random from its own code (derandomize), and no example database carries draws from one run to the next
# (derandomize implies database=None). A red run then means the code changed, not the draw. Random
# exploration is `make fuzz` (docs/fuzzing.md), where a new failure is a finding with a shrunk spec.
# Loaded here, before any test module is imported: a module's `settings(...)` takes what it does not set
# from the profile loaded when it is made. `pytest --hypothesis-profile=explore` draws at random again.
settings.register_profile("normdiff-test", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, database=None)
settings.load_profile("normdiff-test")


def _no_local_constants() -> None:
    """Hypothesis (6.131 on) mixes literals of the project's imported modules into its draws; which are imported
    when a @given test runs depends on what its xdist worker ran before, so the same seed drew other programs
    (29 of 100 program batches changed after one more module was imported). Its private hook, left as it is
    where a version has none (tests/search/test_programs.py holds the outcome either way)."""
    from hypothesis.internal.conjecture import providers

    if hasattr(providers, "_get_local_constants"):
        none = providers.Constants()
        providers._get_local_constants = lambda: none


_no_local_constants()


def _quiet_libraries() -> None:
    """Two lines of third-party chatter cut into make test's first progress line (issue 45, from a fresh clone):
    ExecuTorch's importlib.resources read_text/open_text DeprecationWarnings, printed where a test process
    first imports it, and torch's log line on torchao's register_constant() of an Enum, which torch's own
    handler writes to the terminal around pytest's capture. Silenced by their messages and logger in each test
    process (pyproject's filterwarnings holds the same messages inside tests); ours still show. Not through
    PYTHONWARNINGS: any -W option stops pytest showing DeprecationWarnings at all, ours too."""
    import logging
    import warnings

    quiet = ("read_text is deprecated", "open_text is deprecated")
    for message in quiet:
        warnings.filterwarnings("ignore", message=message, category=DeprecationWarning)
    logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)


_quiet_libraries()

HISTORY_NAME = "history.sqlite"  # harness.reports.history.HISTORY_FILE, and its -wal/-shm files
CACHE_HOME = "NORMDIFF_TEST_CACHE_HOME"  # the session's cache home, made by the controller for its xdist workers


def _groups_kept(config) -> None:
    """make test's `--dist loadgroup` keeps each xdist_group on one worker, so a group's module fixture (a run of 16
    paths, a model's capture) is made once. With pytest 9.2's structured node ids, xdist 3.8 cannot add its group
    suffix and ignores every group silently: each fixture made on both workers, minutes of make test
    (pytest-dev/pytest-xdist#1386, open). pyproject pins pytest below 9.2; another install stops here, in one line."""
    major, minor = (int(v) for v in pytest.__version__.split(".")[:2])
    if config.getoption("dist", default=None) == "loadgroup" and (major, minor) >= (9, 2):
        raise pytest.UsageError(f"pytest {pytest.__version__} with --dist loadgroup: pytest-xdist ignores every "
                                "xdist_group (pytest-dev/pytest-xdist#1386); install pytest<9.2 (pyproject.toml)")


def _worker_exit_quiet(config) -> None:
    """An xdist worker's finalizers print after its last test, straight into make test's output: once (a fresh
    clone at 571e6a3, 2026-12-06) IREE's runtime, whose nanobind bindings list every runtime object a test left
    alive when the worker's interpreter ends (80 lines after the last progress line; issue 45: no third-party
    line). Nothing of a test is printed then (its output was captured and reported), so from the worker's
    atexit on its stderr goes to a file of the session's cache home, which the controller removes."""
    if not hasattr(config, "workerinput"):
        return
    import atexit
    import sys

    def quiet() -> None:
        sys.stderr.flush()
        name = f"exit-stderr-{config.workerinput.get('workerid', 'worker')}.txt"
        try:
            fd = os.open(os.path.join(os.environ[CACHE_HOME], name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except (KeyError, OSError):  # the controller removed the folder already
            fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 2)

    atexit.register(quiet)


def pytest_configure(config):
    """Tests write only into temporary folders: the runs they start keep their artifact cache (and
    Inductor's, under it; hypothesis' storage too) in one folder of this session, shared by its xdist workers (which inherit
    the controller's environment), not in ~/.cache. It is removed when the session ends."""
    _groups_kept(config)
    _worker_exit_quiet(config)
    if hasattr(config, "workerinput") or CACHE_HOME in os.environ:
        return
    home = tempfile.mkdtemp(prefix="normdiff-test-cache-")
    os.environ[CACHE_HOME] = os.environ["XDG_CACHE_HOME"] = home
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = os.path.join(home, "hypothesis")  # not .hypothesis/ in the checkout
    config._normdiff_cache_home = home


def pytest_unconfigure(config):
    home = getattr(config, "_normdiff_cache_home", None)
    if home:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def cli():
    """The real `normdiff` command line, in a fresh interpreter."""
    return normdiff


@pytest.fixture(scope="session")
def smoke_on_eager(tmp_path_factory):
    """`normdiff run --suite smoke --paths eager --jobs 2` in a fresh interpreter, once: (its output folder, the
    command's result), read and never written by the tests of that run (tests/commands/test_main.py: its
    records and summary; tests/cases/test_suites.py: every verdict explained; tests/test_pytest_plugin.py:
    the baseline the plugin must agree with). Each of the three made this run of its own; they share the
    xdist group `smoke_on_eager`, so the run is made once in `make test`. Records do not depend on --jobs."""
    out = tmp_path_factory.mktemp("smoke-on-eager") / "out"
    return out, normdiff("run", "--suite", "smoke", "--paths", "eager", "--jobs", "2", "--out", str(out), "--quiet")


@pytest.fixture(scope="session")
def session_cache():
    """The session's artifact cache, the one its command-line runs use ($XDG_CACHE_HOME/normdiff under the
    session's cache home, shared by the xdist workers): for tests that need a path compiled, not a fresh
    compile, so that a structure compiled once serves every test that asks for it. A test of the cache
    itself (what is stored, hit, evicted) keeps a cache of its own under tmp_path."""
    from harness.engine.cache import ArtifactCache, default_dir

    return ArtifactCache(default_dir())


@pytest.fixture(scope="module")
def execute_cached(session_cache):
    """`Executor.execute` over the session's artifact cache, one executor per test module: its tests share
    their prepared artifacts in memory (as harness.engine.execute.execute does in a process), and a structure
    another worker or run of the session compiled is restored, not compiled again. For tests of what a
    path's record says (verdict, dtypes, facts), not of the compile or the cache."""
    from harness.engine.execute import Executor

    return Executor(session_cache).execute


@pytest.fixture
def cli_here(tmp_path):
    """The command line in this process, from tmp_path or `cwd` (helpers.normdiff_here says for what).
    Each command keeps tests through `cli`, the real command line in a fresh interpreter."""
    return lambda *args, cwd=None: normdiff_here(*args, cwd=cwd or tmp_path)


@pytest.fixture
def tiny_library(tmp_path):
    """A tiny model library (tests/zoo_library.py) written into tmp_path: the import root holding `tinylib`."""
    return zoo_library.write(tmp_path)


@pytest.fixture
def tiny_models(tiny_library):
    """The folder of tinylib's model folders (what `zoo list --root` points at)."""
    return tiny_library / "tinylib" / "models"


def checkout_histories() -> dict[str, tuple[int, int]]:
    """Every run-history file in the checkout (its top folder and reports/, at any depth), with its
    size and modification time: a test that runs a command appends to one only in its tmp_path."""
    found = {}
    for folder, _, files in [(ROOT, None, os.listdir(ROOT)), *os.walk(os.path.join(ROOT, "reports"))]:
        for name in files:
            if name.startswith(HISTORY_NAME):
                full = os.path.join(folder, name)
                try:
                    st = os.stat(full)
                except FileNotFoundError:  # a -wal file checkpointed away meanwhile
                    continue
                found[full] = (st.st_size, st.st_mtime_ns)
    return found


@pytest.fixture(autouse=True)
def _no_history_in_the_checkout():
    """Fails a test after which the checkout holds a new or changed run history (one run from the
    checkout without --out/--history writes reports/latest/history.sqlite; before issue 28 every
    run appended to reports/history.sqlite there). Runs of `make nightly` in the same checkout at
    the same time would trip it too."""
    before = checkout_histories()
    yield
    after = checkout_histories()
    if after != before:
        changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
        pytest.fail("a run history was written inside the checkout, not in the test's tmp_path: "
                    + ", ".join(os.path.relpath(p, ROOT) for p in changed), pytrace=False)
