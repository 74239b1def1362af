"""pytest plugin: one test per normdiff case × path, known failures as strict xfail.

    pytest -p harness.pytest_plugin --normdiff-suite smoke --normdiff-paths eager,tvm

(`-p` is not needed once the package's pytest11 entry point is installed.)
Tests are named `normdiff::PATH::PATTERN-STYLE-DTYPE-SHAPE-CASE_ID`, so `-k`
selects by path, pattern or dtype, `--junitxml` gets the classname
`normdiff.PATH`, and pytest-xdist's `-n` spreads them over workers. Each entry
of the baseline (reports/baseline.json, or --normdiff-baseline) becomes a
strict xfail that only the expected verdict satisfies: another verdict is a
failure, and a pass is XPASS(strict), a failure too, as in `normdiff gate`.

Without test paths on the command line only the normdiff tests run; name test
files too (`pytest tests/ --normdiff-suite smoke`) to run both. Each pytest
process runs its executions in the runner's warm, isolated worker pool (one
worker per path), so a crashing compiler is a `crash` verdict, not a dead
session.
The plugin is inert without --normdiff-suite or --normdiff-case.
"""
from __future__ import annotations

import json
import os

import pytest

from harness.commands.common import load_specs, paths_arg
from harness.core.errors import UsageError
from harness.core.records import Record
from harness.core.verdicts import DEFAULT_TIMEOUT, VERDICTS, Verdict
from harness.reports import baseline as gate

_PLAN = pytest.StashKey[dict]()
_POOL = pytest.StashKey[object]()


class VerdictFailure(Exception):
    """A failing verdict; one subclass per verdict so xfail(raises=…) accepts only the expected one."""

    verdict = ""

    def __init__(self, record: Record):
        super().__init__(f"{record.verdict}: {record.message}")
        self.record = record
        self.reduced = ""  # with --normdiff-reduce: where the reduced spec is, or why there is none


FAILURES: dict[str, type[VerdictFailure]] = {
    v: type("Normdiff" + "".join(w.title() for w in v.split("_")), (VerdictFailure,), {"verdict": v})
    for v in VERDICTS if v != Verdict.PASS
}


def pytest_addoption(parser):
    g = parser.getgroup("normdiff", "normdiff accuracy cases (one test per case × path)")
    g.addoption("--normdiff-suite", action="append", default=[], metavar="NAME",
                help="collect the cases of this normdiff suite (repeatable)")
    g.addoption("--normdiff-case", action="append", default=[], metavar="FILE.json",
                help="collect the cases of this spec file (repeatable)")
    g.addoption("--normdiff-paths", default=None, metavar="A,B",
                help="comma-separated paths (default: every built-in path)")
    g.addoption("--normdiff-baseline", default=None, metavar="FILE",
                help="known failures, run as strict xfail (default: reports/baseline.json when it exists)")
    g.addoption("--normdiff-reduce", default=None, metavar="DIR",
                help="reduce each unexpected failure to the smallest program failing the same way, written to DIR "
                     "(docs/reduce.md); the failure names it")
    g.addoption("--normdiff-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                help=f"seconds per execution before it is a timeout (default {DEFAULT_TIMEOUT:g})")


def _active(config) -> bool:
    return bool(config.getoption("normdiff_suite") or config.getoption("normdiff_case"))


def _plan(config) -> dict:
    """Specs, paths and baseline from the options; pytest.UsageError (one line) when bad."""
    suites = list(config.getoption("normdiff_suite") or [])
    try:
        specs = load_specs(suites, config.getoption("normdiff_case"), default=None)
        names = paths_arg(config.getoption("normdiff_paths"))
    except UsageError as exc:
        raise pytest.UsageError(f"normdiff: {exc}") from None

    file = config.getoption("normdiff_baseline")
    if file is None:
        for base in (os.getcwd(), str(config.rootpath)):
            candidate = os.path.join(base, gate.DEFAULT_BASELINE)
            if os.path.exists(candidate):
                file = candidate
                break
    try:
        baseline = gate.load_baseline(file) if file else {}
    except gate.BaselineError as exc:
        raise pytest.UsageError(f"--normdiff-baseline: {exc}") from None
    return {"specs": specs, "paths": names, "baseline": baseline}


def pytest_configure(config):
    if _active(config):
        config.stash[_PLAN] = _plan(config)
        # pytest-xdist registers it too; without xdist the mark is harmless, and known
        config.addinivalue_line("markers", "xdist_group(name): run these tests on one xdist worker")


def pytest_ignore_collect(collection_path, config):
    """Only the normdiff tests, unless test paths were named on the command line."""
    if _active(config) and config.args_source != pytest.Config.ArgsSource.ARGS:
        return True
    return None


class NormdiffCollector(pytest.Collector):
    """The `normdiff` node: one child per path, so test ids read normdiff::PATH::CASE."""

    def collect(self):
        plan = self.config.stash[_PLAN]
        return [PathCollector.from_parent(self, name=p) for p in plan["paths"]]


class PathCollector(pytest.Collector):
    """One path's tests, one per case, in a stable order."""

    def collect(self):
        from harness.reports.baseline import case_label

        plan = self.config.stash[_PLAN]
        specs = sorted(plan["specs"], key=lambda s: case_label(s.to_dict(), s.case_id))
        return [NormdiffItem.from_parent(self, name=case_label(s.to_dict(), s.case_id), spec=s, path_name=self.name,
                                         entry=plan["baseline"].get((s.case_id, self.name)))
                for s in specs]


class NormdiffItem(pytest.Item):
    """One case through one path, scored against the FP64 reference."""

    def __init__(self, *, spec, path_name: str, entry=None, **kw):
        super().__init__(**kw)
        self.spec = spec
        self.path_name = path_name
        self.entry = entry
        for word in (path_name, spec.pattern, spec.style, spec.dtype, spec.case_id):
            self.extra_keyword_matches.add(word)
        self.add_marker(pytest.mark.xdist_group(f"normdiff:{path_name}:{spec.structure_key()}"))
        if entry is not None:
            self.add_marker(pytest.mark.xfail(strict=True, raises=FAILURES[entry.verdict],
                                              reason=f"known failure ({entry.upstream}): {entry.reason}"))

    def runtest(self):
        record = _pool(self.session).submit(self.spec, self.path_name)
        for key in ("case_id", "verdict", "max_abs_err", "max_ulp", "max_err_over_tol"):
            value = record.get(key)  # plain str (a Verdict is a StrEnum): xdist sends properties over execnet
            self.user_properties.append((key, str(value) if isinstance(value, str) else value))
        if record.verdict_output is not None:  # several outputs: which set the verdict, and each one's
            self.user_properties += [("verdict_output", record.verdict_output),
                                     ("outputs", [[s.name, str(s.verdict), s.max_err_over_tol] for s in record.scores])]
        if record.verdict != Verdict.PASS:
            failure = FAILURES.get(record.verdict, VerdictFailure)(record)
            if self.entry is not None and gate.outputs_differ(record, self.entry):  # not the outputs the entry expects
                failure = VerdictFailure(record)
            folder = self.config.getoption("normdiff_reduce")
            if folder and self.entry is None and self.path_name != "eager":
                from harness.search.reduce import reduce_into

                failure.reduced = reduce_into(folder, self.spec, self.path_name, _pool(self.session).map)
            raise failure

    def repr_failure(self, excinfo, style=None):
        if not isinstance(excinfo.value, VerdictFailure):
            return super().repr_failure(excinfo, style)
        r = excinfo.value.record
        lines = [f"{r['verdict']} on {self.path_name}: {r.get('message', '')}"]
        if r.get("stage"):
            lines.append(f"stage: {r['stage']}")
        lines += [f"output {o['name']}: {o['verdict']}: {o['message']}" for o in r.get("outputs") or ()]
        if self.entry is not None:
            lines.append(f"baseline expects {self.entry.verdict} ({self.entry.upstream}: {self.entry.reason})")
        lines += [f"spec: {json.dumps(r['case'])}",
                  f"reproduce: normdiff repro SPEC.json --path {self.path_name}  (the spec above in SPEC.json)"]
        if excinfo.value.reduced:
            lines.append(excinfo.value.reduced)
        return "\n".join(lines)

    def reportinfo(self):
        return self.path, None, f"normdiff {self.path_name} {self.spec}"


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselection and xdist's loadgroup
def pytest_collection_modifyitems(session, config, items):
    if _PLAN in config.stash:
        root = NormdiffCollector.from_parent(session, name="normdiff", nodeid="normdiff")
        items.extend(session.genitems(root))  # with collect reports, so counts and -k see them


def pytest_unconfigure(config):
    pool = config.stash.get(_POOL, None)
    if pool is not None:
        pool.__exit__(None, None, None)


def _pool(session):
    """The runner's warm worker pool for this pytest process, one worker per selected path, started once."""
    config = session.config
    if _POOL not in config.stash:
        from harness.engine.pool import Pool

        lanes = sorted({item.path_name for item in session.items if isinstance(item, NormdiffItem)})
        pool = Pool(lanes, timeout=config.getoption("normdiff_timeout"))
        config.stash[_POOL] = pool.__enter__()
    return config.stash[_POOL]
