"""`normdiff fuzz`: hypothesis searches case specs for failures and shrinks each to a minimal spec.

A failure is a verdict other than pass (or a documented `unsupported`) on a
path under test that eager does not share: eager passes, or fails
differently. Fuzzing `eager` itself counts its own non-pass verdicts
(unstable patterns). Failures are told apart by their signature
(path, verdict, pattern, style, dtype).

Hypothesis stops at the first failure of a search, so the search runs in
rounds. A round is `hypothesis.find` over `harness.search.strategies.case_specs`:
the first example showing a signature not found yet becomes the round's
target, and hypothesis shrinks it while that signature stays. The minimal
spec is re-run to confirm and saved as DIR/failures/<signature>.json; the
next round (a new seed derived from --seed) treats it as known and searches
on, until the budget ends.

Each confirmed minimal spec is also kept in hypothesis' example database
(reports/.hypothesis by default, used as a key-value store). The next run
first re-runs those specs (no search, no shrinking): a signature that still
fails is found at once, one that no longer fails is dropped from the
database, and the whole budget goes to new signatures. (Hypothesis' own
replay is off because a fixed seed, which --seed needs, disables it.)

Every execution goes through a `harness.engine.run.Pool`: warm worker processes, one
per path (eager always, as the baseline), so a crash is a `crash` record and
an artifact is reused while only the input changes. Results are memoised by
case_id, so hypothesis asking for a spec twice costs nothing.
"""
from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from dataclasses import dataclass, field

from harness.core.spec import CaseSpec

SIGNATURE_FIELDS = ("path", "verdict", "pattern", "style", "dtype")
NOT_FAILURES = ("pass", "unsupported")
DEFAULT_EXAMPLES = 100
DEFAULT_SHRINKS = 150
DEFAULT_DATABASE = os.path.join("reports", ".hypothesis")
PROGRESS_EVERY = 30.0  # seconds between progress lines


class BudgetSpent(BaseException):
    """Raised inside the hypothesis test to stop it at once (not a test failure)."""


Signature = tuple[str, str, str, str, str]


def signature(record: dict) -> Signature:
    case = record["case"]
    return (record["path"], record["verdict"], case["pattern"], case["style"], case["dtype"])


def signature_name(sig: Signature) -> str:
    """The file-name form: path.verdict.pattern.style.dtype."""
    return ".".join(sig)


def failing(records: dict[str, dict], under_test: list[str]) -> dict[Signature, dict]:
    """Signature -> record of every failure among the paths under test (eager's record is the baseline)."""
    eager = records.get("eager")
    out = {}
    for path in under_test:
        r = records[path]
        if r["verdict"] in NOT_FAILURES:
            continue
        if path != "eager" and eager is not None and eager["verdict"] == r["verdict"]:
            continue  # eager shares it: not the path's failure
        out[signature(r)] = r
    return out


@dataclass
class Budget:
    """When the search stops: search examples, wall clock, shrink executions per signature, signatures."""

    max_examples: int | None = DEFAULT_EXAMPLES
    minutes: float | None = None
    max_shrinks: int = DEFAULT_SHRINKS
    max_failures: int | None = None
    start: float = field(default_factory=time.monotonic)

    @property
    def deadline(self) -> float:
        return self.start + 60.0 * self.minutes if self.minutes else math.inf

    def time_left(self) -> bool:
        return time.monotonic() < self.deadline


@dataclass
class Finding:
    sig: Signature
    spec: CaseSpec
    record: dict
    eager_verdict: str | None
    confirmed: bool
    shrink_complete: bool
    found_after: int
    shrink_examples: int
    replayed: bool = False
    file: str = ""

    @property
    def repro(self) -> str:
        return f"normdiff repro {self.file} --path {self.sig[0]}"


SIMPLE_KINDS = ("normal", "uniform", "constant", "alternating")


class _Round:
    """One hypothesis search: the first new signature becomes the target, then it is shrunk."""

    def __init__(self, fuzzer: "Fuzzer"):
        self.fuzzer = fuzzer
        self.target: Signature | None = None
        self.best: CaseSpec | None = None
        self.found_after = 0
        self.shrinks = 0
        self.new_examples = 0

    def condition(self, spec: CaseSpec) -> bool:
        fz = self.fuzzer
        fz.check_time()
        shrinking = self.target is not None
        if not shrinking and fz.budget.max_examples is not None and fz.search_examples >= fz.budget.max_examples:
            raise BudgetSpent
        if shrinking and self.shrinks >= fz.budget.max_shrinks:
            raise BudgetSpent
        records, fresh = fz.records(spec)
        if fresh:
            self.new_examples += 1
            if shrinking:
                self.shrinks += 1
                fz.shrink_examples += 1
            else:
                fz.search_examples += 1
        fz.maybe_progress()
        found = failing(records, fz.under_test)
        if not shrinking:
            _guide(records, fz.under_test)
            new = sorted(s for s in found if s not in fz.known)
            if not new:
                return False
            self.target = new[0]
            self.found_after = fz.search_examples
            fz.say(f"found {' '.join(self.target)} after {fz.search_examples} examples: {spec}; shrinking")
        if self.target in found:
            self.best = spec
            return True
        return False


def _guide(records: dict[str, dict], under_test: list[str]) -> None:
    """Steer hypothesis toward larger error-to-bound ratios (targeted search)."""
    from hypothesis import target

    for path in under_test:
        ratio = records[path].get("max_err_over_tol")
        if isinstance(ratio, (int, float)) and math.isfinite(ratio):
            target(math.log2(1.0 + min(float(ratio), 1e12)), label=path)


class Fuzzer:
    """Runs rounds of `find` until the budget ends; keeps what every round found."""

    def __init__(self, pool, under_test: list[str], strategy, options: dict, budget: Budget,
                 seed: int, database, out_dir: str, progress: bool = True):
        self.pool = pool
        self.under_test = under_test
        self.strategy = strategy
        self.options = options
        self.budget = budget
        self.seed = seed
        self.database = database
        self.out_dir = out_dir
        self.progress = progress
        self.memo: dict[str, dict[str, dict]] = {}
        self.known: set[Signature] = set()
        self.findings: list[Finding] = []
        self.search_examples = 0
        self.shrink_examples = 0
        self.replay_examples = 0
        self.executions = 0
        self.warm_at: float | None = None  # when the first execution came back (workers started)
        self._last_progress = time.monotonic()

    # -- executions --
    def records(self, spec: CaseSpec) -> tuple[dict[str, dict], bool]:
        """Path -> record for `spec` (eager and every path under test); fresh = not memoised."""
        if spec.case_id in self.memo:
            return self.memo[spec.case_id], False
        self.memo[spec.case_id] = self._execute(spec)
        return self.memo[spec.case_id], True

    def _execute(self, spec: CaseSpec) -> dict[str, dict]:
        from harness.engine.run import Task

        lanes = list(dict.fromkeys(["eager", *self.under_test]))
        out = self.pool.map([Task(spec, p) for p in lanes])
        self.executions += len(out)
        if self.warm_at is None:
            self.warm_at = time.monotonic()
            self.say(f"workers started; first example took {self.warm_at - self.budget.start:.1f} s")
        return {r["path"]: r for r in out}

    # -- budget and messages --
    def check_time(self) -> None:
        if not self.budget.time_left():
            raise BudgetSpent

    def examples(self) -> int:
        return self.search_examples + self.shrink_examples + self.replay_examples

    def rate(self) -> float:
        """Examples per minute after the first (which includes the workers' start-up)."""
        if self.warm_at is None:
            return 0.0
        minutes = (time.monotonic() - self.warm_at) / 60.0
        return (self.examples() - 1) / minutes if minutes > 0 and self.examples() > 1 else 0.0

    def say(self, text: str) -> None:
        if self.progress:
            print(f"normdiff fuzz: {text}", file=sys.stderr, flush=True)

    def maybe_progress(self) -> None:
        now = time.monotonic()
        if now - self._last_progress >= PROGRESS_EVERY:
            self._last_progress = now
            self.say(f"{self.examples()} examples ({self.search_examples} search, {self.shrink_examples} shrink), "
                     f"{len(self.findings)} signatures, {self.rate():.1f} examples/min")

    # -- the search --
    def run(self) -> list[Finding]:
        self._replay()
        round_no = 0
        while self.budget.time_left():
            if self.budget.max_failures is not None and len(self.findings) >= self.budget.max_failures:
                break
            if self.budget.max_examples is not None and self.search_examples >= self.budget.max_examples:
                break
            rnd = _Round(self)
            stopped = self._find(rnd, round_no)
            round_no += 1
            if rnd.target is not None:
                self._finish(rnd, complete=not stopped)
            elif stopped or rnd.new_examples == 0:
                break  # budget spent, or the search space gave nothing new
        return self.findings

    def _replay(self) -> None:
        """Re-run the minimal specs earlier runs kept; those still failing are found at once."""
        if self.database is None:
            return
        from harness.search.strategies import in_space

        space = {k: self.options[k] for k in ("patterns", "styles", "dtypes", "max_row", "max_elements")}
        for sig, spec, raw in stored_findings(self.database):
            if sig[0] not in self.under_test or sig in self.known:
                continue
            if not in_space(spec, input_kinds=self.options["inputs"], **space):
                continue
            self.check_time()
            records = self._execute(spec)
            self.replay_examples += 1
            if sig not in failing(records, self.under_test):
                self.database.delete(DB_KEY, raw)
                self.say(f"no longer fails, dropped from the database: {' '.join(sig)}: {spec}")
                continue
            self.known.add(sig)
            finding = Finding(sig, spec, records[sig[0]], records["eager"]["verdict"], True, True, 0, 0,
                              replayed=True)
            finding.file = save_failure(self.out_dir, sig, spec)
            self.findings.append(finding)
            self.say(f"still fails (from the database): {' '.join(sig)}: {spec}; saved {finding.file}")

    def _find(self, rnd: _Round, round_no: int) -> bool:
        """Run one round; True when the budget stopped it."""
        from hypothesis import HealthCheck, Phase, Verbosity, find, settings
        from hypothesis.errors import NoSuchExample

        left = (self.budget.max_examples - self.search_examples) if self.budget.max_examples else 10 ** 6
        config = settings(
            database=None, max_examples=max(1, left), deadline=None,
            phases=[Phase.generate, Phase.target, Phase.shrink],
            suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet,
            report_multiple_bugs=False, print_blob=False,
        )
        try:
            find(self.strategy, rnd.condition, settings=config,
                 random=random.Random(f"normdiff-fuzz:{self.seed}:{round_no}"))
        except BudgetSpent:
            return True
        except NoSuchExample:
            return False
        except Exception as exc:  # noqa: BLE001 - e.g. hypothesis calls a flaky result out
            if rnd.target is None:
                raise
            self.say(f"shrinking stopped early: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return False

    def _simpler_input(self, rnd: _Round) -> None:
        """Try a simple input kind in place of an adversarial one, growing the row if it must.

        Hypothesis shrinks one choice at a time, so a failure that needs a long
        row under a benign input can end on a short row under an adversarial one
        (overflow on [2] rather than normal on [1024]). A report reads better
        with the simple input, so each simple kind is tried at the shrunk row
        length, then at 4x longer rows up to 4096 elements (or the search's
        --max-row), within the search space the user asked for.
        """
        from harness.search.strategies import in_space

        spec, sig = rnd.best, rnd.target
        if spec.input_dict["kind"] in SIMPLE_KINDS:
            return
        space = {k: self.options[k] for k in ("patterns", "styles", "dtypes", "max_row", "max_elements")}
        limit = min(4096, self.options["max_row"] or 4096)
        lengths = [spec.shape[-1]]
        while lengths[-1] * 4 <= limit:
            lengths.append(lengths[-1] * 4)
        for kind in SIMPLE_KINDS:
            for length in lengths:
                try:
                    candidate = spec.replace(input={"kind": kind}, shape=list(spec.shape[:-1]) + [length])
                except ValueError:
                    continue
                if not in_space(candidate, input_kinds=self.options["inputs"], **space):
                    continue
                if not self.budget.time_left():
                    return
                records, fresh = self.records(candidate)
                rnd.shrinks += fresh
                self.shrink_examples += fresh
                if sig in failing(records, self.under_test):
                    self.say(f"a simpler input keeps {' '.join(sig)}: {candidate}")
                    rnd.best = candidate
                    return

    def _finish(self, rnd: _Round, complete: bool) -> None:
        """Confirm the round's minimal spec by re-running it, save it, mark its signature known."""
        self._simpler_input(rnd)
        sig, spec = rnd.target, rnd.best
        self.known.add(sig)
        records = self._execute(spec)  # a fresh execution, not the memo
        confirmed = sig in failing(records, self.under_test)
        finding = Finding(sig, spec, records[sig[0]], records["eager"]["verdict"], confirmed, complete,
                          rnd.found_after, rnd.shrinks)
        if confirmed:
            finding.file = save_failure(self.out_dir, sig, spec)
            if self.database is not None:
                keep_finding(self.database, sig, spec)
        self.findings.append(finding)
        state = "confirmed" if confirmed else "NOT confirmed on re-run (flaky); not saved"
        how = "shrunk" if complete else "shrinking stopped by the budget at"
        self.say(f"{how} {spec} after {rnd.shrinks} shrink examples; {state}"
                 + (f"; saved {finding.file}" if finding.file else ""))


# -- the database of minimal failures ---------------------------------------------

DB_KEY = b"normdiff-fuzz.minimal-failures.v1"


def stored_findings(db) -> list[tuple[Signature, CaseSpec, bytes]]:
    """(signature, spec, raw entry) of every minimal failure kept, in signature order."""
    out = []
    for raw in db.fetch(DB_KEY):
        try:
            entry = json.loads(raw.decode())
            out.append((tuple(entry["signature"]), CaseSpec.from_dict(entry["spec"]), raw))
        except Exception:  # noqa: BLE001 - an entry of an older format: drop it
            db.delete(DB_KEY, raw)
    return sorted(out, key=lambda e: (e[0], e[1].to_json()))


def keep_finding(db, sig: Signature, spec: CaseSpec) -> None:
    """Keep `spec` as the minimal failure of `sig`, replacing an earlier one."""
    for old_sig, _, raw in stored_findings(db):
        if old_sig == sig:
            db.delete(DB_KEY, raw)
    db.save(DB_KEY, json.dumps({"signature": list(sig), "spec": spec.to_dict()}, sort_keys=True).encode())


# -- files ---------------------------------------------------------------------

def failures_dir(out_dir: str) -> str:
    return os.path.join(out_dir, "failures")


def save_failure(out_dir: str, sig: Signature, spec: CaseSpec) -> str:
    """Write the spec (plain DESIGN §1 JSON, so `run --case` and `repro` take it) and return its path."""
    folder = failures_dir(out_dir)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, signature_name(sig) + ".json")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(spec.to_dict(), indent=2) + "\n")
    return path


def clear_failures(out_dir: str) -> None:
    """Remove what an earlier fuzz run left in DIR (its failures and summary)."""
    folder = failures_dir(out_dir)
    if os.path.isdir(folder):
        for name in os.listdir(folder):
            if name.endswith(".json"):
                os.remove(os.path.join(folder, name))
    summary = os.path.join(out_dir, "fuzz.json")
    if os.path.exists(summary):
        os.remove(summary)


def write_summary(out_dir: str, fz: Fuzzer, args_used: dict) -> str:
    """DIR/fuzz.json: the search's settings, its throughput and every finding with its repro command."""
    elapsed = time.monotonic() - fz.budget.start
    data = {
        "settings": args_used,
        "search_examples": fz.search_examples,
        "shrink_examples": fz.shrink_examples,
        "replay_examples": fz.replay_examples,
        "executions": fz.executions,
        "seconds": round(elapsed, 3),
        "examples_per_minute": round(fz.rate(), 2),
        "findings": [{
            **dict(zip(SIGNATURE_FIELDS, f.sig)),
            "signature": signature_name(f.sig), "file": f.file or None,
            "repro": f.repro if f.file else None, "case_id": f.spec.case_id, "case": f.spec.to_dict(),
            "confirmed": f.confirmed, "shrink_complete": f.shrink_complete, "replayed": f.replayed,
            "found_after_examples": f.found_after, "shrink_examples": f.shrink_examples,
            "eager_verdict": f.eager_verdict, "message": f.record.get("message"),
            "record": f.record,
        } for f in sorted(fz.findings, key=lambda f: f.sig)],
    }
    from harness.core.records import _clean

    path = os.path.join(out_dir, "fuzz.json")
    os.makedirs(out_dir, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(_clean(data), indent=2, allow_nan=False) + "\n")
    return path


def table(findings: list[Finding]) -> str:
    """The signatures found, one line each, with their shrunk spec and file."""
    from harness.search.strategies import row_length

    head = ("path", "verdict", "pattern", "style", "dtype", "shape", "row", "input", "spec file")
    rows = []
    for f in sorted(findings, key=lambda f: f.sig):
        inp = f.spec.input_dict
        kind = inp.pop("kind")
        rows.append((*f.sig, "x".join(map(str, f.spec.shape)), str(row_length(f.spec)),
                     f"{kind}({','.join(f'{k}={v:g}' for k, v in inp.items())})",
                     f.file or "(not confirmed: flaky)"))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *rows]]
    return "\n".join(lines)


# -- the command -----------------------------------------------------------------

def _csv(text: str | None) -> list[str] | None:
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    return items or None


def add_command(subparsers) -> None:
    p = subparsers.add_parser("fuzz", help="hypothesis search for failing specs, each shrunk to a minimal one")
    p.add_argument("--paths", help="comma-separated paths to fuzz (default: every registered path); "
                                   "eager always runs as the baseline")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--max-examples", type=int, help=f"search examples in all (default {DEFAULT_EXAMPLES})")
    budget.add_argument("--minutes", type=float, help="search for this long instead")
    p.add_argument("--out", default=os.path.join("reports", "latest"),
                   help="output folder: DIR/failures/<signature>.json and DIR/fuzz.json (default reports/latest)")
    p.add_argument("--seed", type=int, help="makes the search reproducible (default: random, printed)")
    p.add_argument("--database", default=DEFAULT_DATABASE,
                   help=f"hypothesis example database folder, or 'none' (default {DEFAULT_DATABASE})")
    p.add_argument("--patterns", help="restrict to these patterns (comma-separated)")
    p.add_argument("--styles", help="restrict to these styles")
    p.add_argument("--dtypes", help="restrict to these activation dtypes")
    p.add_argument("--inputs", help="input kinds and/or groups: benign, adversarial, all (default all)")
    p.add_argument("--max-row", type=int, default=8192, help="longest layer/rms row (default 8192)")
    p.add_argument("--max-elements", type=int, default=65536, help="largest input (default 65536)")
    p.add_argument("--max-shrinks", type=int, default=DEFAULT_SHRINKS,
                   help=f"shrink executions per signature (default {DEFAULT_SHRINKS})")
    p.add_argument("--max-failures", type=int, help="stop after this many signatures")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per execution (default 300)")
    p.add_argument("--quiet", action="store_true", help="no progress lines (the final table still prints)")
    p.set_defaults(func=cmd_fuzz)


def _options(args) -> tuple[object, dict]:
    """The strategy the arguments ask for, and those arguments as a dict."""
    from harness.commands.main import UsageError
    from harness.search.strategies import case_specs

    options = {"patterns": _csv(args.patterns), "styles": _csv(args.styles), "dtypes": _csv(args.dtypes),
               "inputs": _csv(args.inputs), "max_row": args.max_row, "max_elements": args.max_elements}
    try:
        strategy = case_specs(patterns=options["patterns"], styles=options["styles"], dtypes=options["dtypes"],
                              input_kinds=options["inputs"], max_row=args.max_row,
                              max_elements=args.max_elements)
    except ValueError as exc:
        raise UsageError(f"fuzz: {exc}") from None
    return strategy, options


def _check_numbers(args) -> None:
    from harness.commands.main import UsageError

    for name in ("max_examples", "max_shrinks", "max_failures"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')}: must be >= 1, got {value}")
    if args.minutes is not None and not (args.minutes > 0 and math.isfinite(args.minutes)):
        raise UsageError(f"--minutes: must be > 0, got {args.minutes}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout: must be > 0, got {args.timeout}")
    if args.seed is not None and args.seed < 0:
        raise UsageError(f"--seed: must be >= 0, got {args.seed}")


def cmd_fuzz(args) -> int:
    from harness.commands.main import _paths_arg
    from harness.engine.run import Pool, RunnerError

    _check_numbers(args)
    under_test = _paths_arg(args.paths)
    strategy, options = _options(args)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2 ** 32)
    database = None
    if args.database.lower() != "none":
        from hypothesis.database import DirectoryBasedExampleDatabase

        database = DirectoryBasedExampleDatabase(args.database)
    budget = Budget(max_examples=None if args.minutes else (args.max_examples or DEFAULT_EXAMPLES),
                    minutes=args.minutes, max_shrinks=args.max_shrinks, max_failures=args.max_failures)
    settings_used = {"paths": under_test, "seed": seed, "max_examples": budget.max_examples,
                     "minutes": args.minutes, "max_shrinks": args.max_shrinks,
                     "max_failures": args.max_failures, "database": None if database is None else args.database,
                     **options}

    clear_failures(args.out)
    limit = f"{budget.max_examples} examples" if budget.max_examples else f"{args.minutes:g} minutes"
    print(f"normdiff fuzz: paths {', '.join(under_test)}; seed {seed}; budget {limit}; "
          f"database {settings_used['database']}", file=sys.stderr, flush=True)
    fz = None
    interrupted = False
    try:
        with Pool(["eager", *under_test], timeout=args.timeout) as pool:
            fz = Fuzzer(pool, under_test, strategy, options, budget, seed, database, args.out,
                        progress=not args.quiet)
            fz.run()
    except KeyboardInterrupt:
        interrupted = True
    except RunnerError as exc:
        print(f"normdiff: error: fuzz: {exc}", file=sys.stderr)
        return 2
    if fz is None:
        return 130
    write_summary(args.out, fz, settings_used)
    _report(fz, args.out, seed)
    if interrupted:
        print("normdiff fuzz: interrupted; what was found is saved", file=sys.stderr)
        return 130
    return 1 if fz.findings else 0


def _report(fz: Fuzzer, out_dir: str, seed: int) -> None:
    minutes = (time.monotonic() - fz.budget.start) / 60.0
    err = sys.stderr
    print(f"normdiff fuzz: {fz.examples()} examples ({fz.search_examples} search, {fz.shrink_examples} shrink, "
          f"{fz.replay_examples} replayed; "
          f"{fz.executions} executions) in {minutes:.2f} min: {fz.rate():.1f} examples/min", file=err)
    if not fz.findings:
        print(f"normdiff fuzz: no failure found (seed {seed})", file=err)
        return
    print(f"normdiff fuzz: {len(fz.findings)} signatures (seed {seed}); summary in "
          f"{os.path.join(out_dir, 'fuzz.json')}", file=err)
    print(table(fz.findings), file=err)
    for f in sorted(fz.findings, key=lambda f: f.sig):
        if f.file:
            print(f"  {f.repro}", file=err)
    err.flush()
