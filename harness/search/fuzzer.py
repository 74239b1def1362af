"""`normdiff fuzz`: hypothesis searches case specs for failures and shrinks each to a minimal spec.

A failure is a verdict other than pass (or a documented `unsupported`) on a
path under test that eager does not share: eager passes, or fails
differently. Fuzzing `eager` itself counts its own non-pass verdicts
(unstable patterns). Failures are told apart by their signature
(path, verdict, pattern, style, dtype).

Hypothesis stops at the first failure of a search, so the search runs in
rounds. A round is `hypothesis.find` over batches (`harness.search.strategies.Batch`:
a catalog spec alone, or a drawn program's structure with several inputs, so
a path compiles once for them all): the first example showing a signature not
found yet becomes the round's target, and hypothesis shrinks its batch while
one of its examples still shows that signature; that example is the round's
finding. The minimal spec is re-run to confirm and saved as
DIR/failures/<signature>.json; the next round (a new seed derived from
--seed) treats it as known and searches on, until the budget ends.

Each confirmed minimal spec is also kept in hypothesis' example database
(reports/.hypothesis by default, used as a key-value store). The next run
first re-runs those specs (no search, no shrinking): a signature that still
fails is found at once, one that no longer fails is dropped from the
database, and the whole budget goes to new signatures. (Hypothesis' own
replay is off because a fixed seed, which --seed needs, disables it.)

Every execution goes through a `harness.engine.run.Pool`: warm worker processes, one
per path (eager always, as the baseline), so a crash is a `crash` record and
an artifact is reused while only the input changes; a batch is one `map`, so
each worker takes its examples back to back. Results are memoised by case_id,
so hypothesis asking for a spec twice costs nothing. An example is one spec
run on eager and every path under test.
"""
from __future__ import annotations

import math
import os
import random
import sys
import time
from dataclasses import dataclass, field

from harness.spec import CaseSpec
from harness.core.verdicts import FAILING
from harness.engine.plan import Task
from harness.search.store import (
    Signature,
    drop_finding,
    explained,
    is_program,
    keep_finding,
    save_failure,
    signature,
    stored_findings,
)
from harness.search.strategies import Batch, in_space

DEFAULT_EXAMPLES = 100
DEFAULT_SHRINKS = 150
DEFAULT_DATABASE = os.path.join("reports", ".hypothesis")
PROGRESS_EVERY = 30.0  # seconds between progress lines


class BudgetSpent(BaseException):
    """Raised inside the hypothesis test to stop it at once (not a test failure)."""


def failing(records: dict[str, dict], under_test: list[str], skeletons=None) -> dict[Signature, dict]:
    """Signature -> record of every failure among the paths under test (eager's record is the baseline);
    `skeletons`: case_id -> skeleton key, of the programs drawn (store.signature)."""
    eager = records.get("eager")
    out = {}
    for path in under_test:
        r = records[path]
        if r["verdict"] not in FAILING:
            continue
        if path != "eager" and eager is not None and eager["verdict"] == r["verdict"]:
            continue  # eager shares it: not the path's failure
        out[signature(r, skeletons)] = r
    return out


@dataclass
class Budget:
    """When the search stops: search examples, wall clock, shrink steps per signature, signatures."""

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
        self.best_sig: Signature | None = None  # a program's signature changes as its skeleton shrinks
        self.found_after = 0
        self.shrinks = 0  # shrink examples run
        self.shrink_steps = 0  # shrink attempts that ran something (a batch is one): what --max-shrinks caps
        self.new_examples = 0

    def condition(self, batch: Batch) -> bool:
        fz = self.fuzzer
        fz.check_time()
        shrinking = self.target is not None
        specs = batch.specs
        if not shrinking and fz.budget.max_examples is not None:
            left = fz.budget.max_examples - fz.search_examples
            if left <= 0:
                raise BudgetSpent
            specs = specs[:left]
        if shrinking and self.shrink_steps >= fz.budget.max_shrinks:
            raise BudgetSpent
        fz.note(batch)
        results, fresh = fz.batch_records(specs)
        self.new_examples += fresh
        if shrinking:
            self.shrinks += fresh
            self.shrink_steps += fresh > 0
            fz.shrink_examples += fresh
        else:
            fz.search_examples += fresh
        fz.maybe_progress()
        found = [(spec, failing(records, fz.under_test, fz.skeletons)) for spec, records in zip(specs, results)]
        if not shrinking:
            _guide(results, fz.under_test)
            new = sorted({s for _, sigs in found for s in sigs if s not in fz.known and not explained(s, fz.known)})
            if not new:
                return False
            self.target = new[0]
            self.found_after = fz.search_examples
            spec = next(spec for spec, sigs in found if self.target in sigs)
            fz.say(f"found {' '.join(self.target)} after {fz.search_examples} examples: {spec}; shrinking")
        for spec, sigs in found:  # the first example of the batch that still shows the target
            same = [s for s in sigs if s == self.target or (
                is_program(self.target) and s[:4] == self.target[:4] and s not in fz.known
                and not explained(s, fz.known))]
            if same:
                self.best, self.best_sig = spec, same[0]
                return True
        return False


def _guide(results: list[dict[str, dict]], under_test: list[str]) -> None:
    """Steer hypothesis toward larger error-to-bound ratios (targeted search): per path, the batch's largest."""
    from hypothesis import target

    for path in under_test:
        ratios = [float(r[path]["max_err_over_tol"]) for r in results
                  if isinstance(r[path].get("max_err_over_tol"), (int, float))
                  and math.isfinite(r[path]["max_err_over_tol"])]
        if ratios:
            target(math.log2(1.0 + min(max(ratios), 1e12)), label=path)


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
        self.skeletons: dict[str, str] = {}  # case_id -> skeleton key, of every program case drawn or replayed
        self.structures: set[str] = set()  # structure keys of the examples run (what the paths compiled)
        self.known: set[Signature] = set()
        self.findings: list[Finding] = []
        self.search_examples = 0
        self.shrink_examples = 0
        self.replay_examples = 0
        self.executions = 0
        self.warm_at: float | None = None  # when the first execution came back (workers started)
        self._last_progress = time.monotonic()

    # -- executions --
    def note(self, batch: Batch) -> None:
        """Remember which skeleton a drawn batch's program came from (its signatures name it)."""
        if batch.skeleton is not None:
            for spec in batch.specs:
                self.skeletons[spec.case_id] = batch.skeleton

    def records(self, spec: CaseSpec) -> tuple[dict[str, dict], bool]:
        """Path -> record for `spec` (eager and every path under test); fresh = not memoised."""
        results, fresh = self.batch_records([spec])
        return results[0], bool(fresh)

    def batch_records(self, specs) -> tuple[list[dict[str, dict]], int]:
        """Path -> record for each of `specs`, the new ones run in one map; how many were new."""
        new = list({s.case_id: s for s in specs if s.case_id not in self.memo}.values())
        if new:
            self.memo.update(zip((s.case_id for s in new), self._execute_all(new, attribute=False)))
        return [self.memo[s.case_id] for s in specs], len(new)

    def _execute(self, spec: CaseSpec) -> dict[str, dict]:
        """A finding's execution: fresh, and attributed (what the saved record shows)."""
        return self._execute_all([spec], attribute=True)[0]

    def _execute_all(self, specs: list[CaseSpec], attribute: bool) -> list[dict[str, dict]]:
        """Path -> record of each spec: fresh executions (not the memo), each lane taking the specs in order.
        Searching and shrinking need verdicts only: their failing executions skip attribution (a rebuild)."""
        lanes = list(dict.fromkeys(["eager", *self.under_test]))
        out = self.pool.map([Task(spec, p, attribute) for spec in specs for p in lanes])
        self.executions += len(out)
        self.structures.update(spec.structure_key() for spec in specs)
        if self.warm_at is None:
            self.warm_at = time.monotonic()
            self.say(f"workers started; first example took {self.warm_at - self.budget.start:.1f} s")
        return [{r["path"]: r for r in out[i:i + len(lanes)]} for i in range(0, len(out), len(lanes))]

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
            self.say(f"{self.examples()} examples ({self.search_examples} search, {self.shrink_examples} shrink) "
                     f"of {len(self.structures)} structures, {len(self.findings)} signatures, "
                     f"{self.rate():.1f} examples/min")

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
        space = {k: self.options[k] for k in ("patterns", "styles", "dtypes", "max_row", "max_elements")}
        for sig, spec, raw in stored_findings(self.database):
            if sig[0] not in self.under_test or sig in self.known:
                continue
            if not in_space(spec, input_kinds=self.options["inputs"], **space):
                continue
            self.check_time()
            if is_program(sig):
                self.skeletons[spec.case_id] = sig[4]
            records = self._execute(spec)
            self.replay_examples += 1
            if sig not in failing(records, self.under_test, self.skeletons):
                drop_finding(self.database, raw)
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
        spec, sig = rnd.best, rnd.best_sig or rnd.target
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
                if spec.case_id in self.skeletons:  # the same program, drawn from the same skeleton
                    self.skeletons[candidate.case_id] = self.skeletons[spec.case_id]
                records, fresh = self.records(candidate)
                rnd.shrinks += fresh
                rnd.shrink_steps += fresh
                self.shrink_examples += fresh
                if sig in failing(records, self.under_test, self.skeletons):
                    self.say(f"a simpler input keeps {' '.join(sig)}: {candidate}")
                    rnd.best = candidate
                    return

    def _finish(self, rnd: _Round, complete: bool) -> None:
        """Confirm the round's minimal spec by re-running it, save it, mark its signature known."""
        self._simpler_input(rnd)
        sig, spec = rnd.best_sig or rnd.target, rnd.best
        self.known.add(sig)
        records = self._execute(spec)  # a fresh execution, not the memo
        confirmed = sig in failing(records, self.under_test, self.skeletons)
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
