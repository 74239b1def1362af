"""The nightly accuracy gate: results against a committed baseline of known failures.

The baseline (reports/baseline.json) lists every execution (case × path) that
is known to fail, with the verdict it is expected to give, the upstream report
it matches ("apache/tvm#20909", or "new") and a one-line reason. Each result
record is then one of

  PASS      passes and is not in the baseline
  XFAIL     fails with exactly the verdict the baseline expects
  FLAKY     its entry says `"flaky": true`: whatever it gives, never fails the gate
  NEW_FAIL  fails but is not in the baseline, or fails with another verdict
  FIXED     the baseline expects a failure and it now passes
  MISSING   in the baseline but not in the results (not judged with --subset)

and the gate exits 1 on any NEW_FAIL, FIXED or MISSING, so that both a
regression and a fix force a reviewed change to the baseline. Flaky entries
(as the PyTorch accuracy gate keeps a flaky list) are counted, so the list
stays short. An entry may name CPU features its failure comes with (`"cpu":
["avx512_fp16"]`, harness.core.machine): it then holds only for records of a
machine that has one of them; elsewhere the execution is judged as if it were
not listed, and a record that names no CPU may pass or fail as listed. `--update` rewrites
the baseline from the results, keeping the upstream report, reason, flaky
mark and CPU features of every entry that stays with its verdict, and every
entry whose CPU features the results' machine lacks; an entry whose verdict
changed is re-triaged (its upstream and reason from the triage rules, as a
new failure's) and listed. An execution of several outputs is
judged by its worst verdict; its entry also names the outputs expected to fail
(`"outputs": {"0": "dtype_mismatch"}`, written by `--update`), and other failing
outputs are a NEW_FAIL. Old files (without "flaky", "cpu" or "outputs") load
unchanged, and an execution of one output is keyed and judged as before.
"""
from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass

from cases.triage import rule_of
from harness.core.machine import FEATURES
from harness.core.records import failing_outputs, latest_per_execution, one_line
from harness.spec import CaseSpec, SpecError
from harness.core.verdicts import VERDICTS, Status, Verdict

FORMAT = "normdiff-baseline"
VERSION = 1
DEFAULT_BASELINE = os.path.join("reports", "baseline.json")
# The statuses in the order of the totals; the rows come problems first (ROW_ORDER).
STATUSES: tuple[str, ...] = (Status.PASS, Status.XFAIL, Status.NEW_FAIL, Status.FIXED, Status.MISSING,
                             Status.FLAKY)
ROW_ORDER: tuple[str, ...] = (Status.NEW_FAIL, Status.FIXED, Status.MISSING, Status.FLAKY, Status.XFAIL,
                              Status.PASS)
MEANING = {Status.PASS: "pass, not in the baseline", Status.XFAIL: "fail as the baseline expects",
           Status.FLAKY: "flaky baseline entries (never fail the gate)",
           Status.NEW_FAIL: "fail, not as the baseline expects", Status.FIXED: "known failures that now pass",
           Status.MISSING: "baseline entries not run"}
ENTRY_KEYS = ("case_id", "path", "verdict", "upstream", "reason", "case")
OPTIONAL_KEYS = ("flaky", "cpu", "outputs")
_UPSTREAM = re.compile(r"^(new|[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#[0-9]+)$")
_ABOUT = ("Known failing executions (case x path) for `normdiff gate`. Edit upstream and reason "
          "by hand; `normdiff gate RESULTS --baseline FILE --update` rewrites the entries and "
          "keeps both.")


class BaselineError(ValueError):
    """A malformed baseline file; the message is one line."""


@dataclass(frozen=True)
class BaselineEntry:
    """One known failure: case × path, its expected verdict, upstream report and reason."""

    case_id: str
    path: str
    verdict: Verdict
    upstream: str
    reason: str
    case: dict
    flaky: bool = False
    cpu: tuple[str, ...] = ()  # the failure comes with any one of these CPU features; () on every machine
    # An execution of several outputs: {output name: verdict} of each output expected to fail (None: judged by the
    # execution's verdict alone, as an execution of one output always is).
    outputs: dict | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.case_id, self.path)

    def holds_on(self, record: dict) -> bool | None:
        """Whether this entry speaks for `record`'s machine: True, False (it has none of the entry's CPU
        features), or None (the record names no CPU)."""
        if not self.cpu:
            return True
        have = record.get("cpu")
        if have is None:
            return None
        return not set(self.cpu).isdisjoint(have)


@dataclass(frozen=True)
class Row:
    """The gate's judgement of one execution."""

    status: Status
    case_id: str
    path: str
    case: dict
    verdict: Verdict | None      # what the results say (None when MISSING)
    expected: Verdict            # pass, or the baseline's verdict
    upstream: str | None = None
    reason: str | None = None
    message: str = ""

    @property
    def note(self) -> str:
        """What a reader needs to act on the row, in one line."""
        if self.status == Status.XFAIL:
            return f"{self.upstream}: {self.reason}"
        if self.status == Status.FLAKY:
            return f"flaky, gave {self.verdict} ({self.upstream}: {self.reason})"
        if self.status == Status.FIXED:
            return f"now passes; remove from the baseline ({self.upstream}: {self.reason})"
        if self.status == Status.MISSING:
            return f"expected {self.expected} but not run ({self.upstream}: {self.reason})"
        if self.status == Status.NEW_FAIL and self.upstream:
            return f"expected {self.expected} ({self.upstream}), got {self.verdict}: {self.message}"
        return self.message


# -- the baseline file --------------------------------------------------------

def case_label(case: dict, case_id: str) -> str:
    """A short readable name for a case: pattern-style-dtype-shape-case_id (a module case's style is its class)."""
    shape = "x".join(str(d) for d in case.get("shape", []))
    style = case["class"].rpartition(":")[2] if case.get("class") else case.get("style")
    return "-".join(str(p) for p in (case.get("pattern"), style, case.get("dtype"), shape, case_id))


def _entry(raw, where: str) -> BaselineEntry:

    if not isinstance(raw, dict):
        raise BaselineError(f"{where}: expected an object, got {type(raw).__name__}")
    for key in raw:
        if key not in ENTRY_KEYS + OPTIONAL_KEYS:
            raise BaselineError(f"{where}: unknown key {key!r} (known: {', '.join(ENTRY_KEYS + OPTIONAL_KEYS)})")
    if not isinstance(raw.get("flaky", False), bool):
        raise BaselineError(f"{where}: key 'flaky' must be true or false")
    cpu = raw.get("cpu", [])
    if not isinstance(cpu, list) or "cpu" in raw and not cpu or any(f not in FEATURES for f in cpu):
        raise BaselineError(f"{where}: key 'cpu' must be a non-empty list of CPU features from "
                            f"{', '.join(FEATURES)}")
    outputs = raw.get("outputs")
    if outputs is not None and (not isinstance(outputs, dict) or not outputs or any(
            not isinstance(k, str) or v not in VERDICTS or v == Verdict.PASS for k, v in outputs.items())):
        raise BaselineError(f"{where}: key 'outputs' must be a non-empty object of output name: failing verdict")
    for key in ENTRY_KEYS:
        if key not in raw:
            raise BaselineError(f"{where}: missing key {key!r}")
    for key in ("case_id", "path", "verdict", "upstream", "reason"):
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise BaselineError(f"{where}: key {key!r} must be a non-empty string")
    if raw["verdict"] not in VERDICTS or raw["verdict"] == Verdict.PASS:
        raise BaselineError(f"{where}: key 'verdict': {raw['verdict']!r} is not a failing verdict "
                            f"(one of {', '.join(VERDICTS[1:])})")
    if not _UPSTREAM.match(raw["upstream"]):
        raise BaselineError(f"{where}: key 'upstream': expected \"owner/repo#N\" or \"new\", got {raw['upstream']!r}")
    if "\n" in raw["reason"]:
        raise BaselineError(f"{where}: key 'reason' must be one line")
    try:
        spec = CaseSpec.from_dict(raw["case"])
    except SpecError as exc:
        raise BaselineError(f"{where}: key 'case': {exc}") from None
    if spec.case_id != raw["case_id"]:
        raise BaselineError(f"{where}: case_id {raw['case_id']!r} does not match its case "
                            f"(which hashes to {spec.case_id!r}); rewrite with --update")
    return BaselineEntry(raw["case_id"], raw["path"], Verdict(raw["verdict"]), raw["upstream"], raw["reason"].strip(),
                 spec.to_dict(), raw.get("flaky", False), tuple(f for f in FEATURES if f in cpu), outputs)


def parse_baseline(text: str, name: str = "baseline") -> dict[tuple[str, str], BaselineEntry]:
    """The entries of a baseline file's text, keyed by (case_id, path); BaselineError if malformed."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{name}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(raw, dict):
        raise BaselineError(f"{name}: expected a JSON object with \"format\", \"version\" and \"entries\"")
    for key in raw:
        if key not in ("format", "version", "about", "entries"):
            raise BaselineError(f"{name}: unknown top-level key {key!r}")
    if raw.get("format") != FORMAT:
        raise BaselineError(f"{name}: key 'format' must be {FORMAT!r}, got {raw.get('format')!r}")
    if raw.get("version") != VERSION:
        raise BaselineError(f"{name}: unsupported version {raw.get('version')!r} (this normdiff reads {VERSION})")
    if not isinstance(raw.get("entries"), list):
        raise BaselineError(f"{name}: key 'entries' must be a list")
    entries: dict[tuple[str, str], BaselineEntry] = {}
    for i, item in enumerate(raw["entries"]):
        where = f"{name}: entry {i}"
        if isinstance(item, dict) and "case_id" in item and "path" in item:
            where += f" ({item['case_id']} on {item['path']})"
        entry = _entry(item, where)
        if entry.key in entries:
            raise BaselineError(f"{where}: duplicate entry for this case and path")
        entries[entry.key] = entry
    return entries


def load_baseline(path: str) -> dict[tuple[str, str], BaselineEntry]:
    """The entries of the baseline file at `path`; BaselineError (one line) if unreadable or malformed."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read ({exc.strerror})") from None
    return parse_baseline(text, path)


def _entry_order(e: BaselineEntry):
    return (e.case.get("pattern"), e.case.get("style"), e.case.get("dtype"), e.case_id, e.path)


def dump_baseline(entries) -> str:
    """Canonical baseline text: sorted entries, one key per line, the spec on one line."""
    items = sorted(entries.values() if isinstance(entries, dict) else entries, key=_entry_order)
    lines = ["{", f'  "format": {json.dumps(FORMAT)},', f'  "version": {VERSION},',
             f'  "about": {json.dumps(_ABOUT)},', '  "entries": [']
    for n, e in enumerate(items):
        keys = (ENTRY_KEYS[:5] + (("flaky",) if e.flaky else ()) + (("cpu",) if e.cpu else ())
                + (("outputs",) if e.outputs else ()) + ENTRY_KEYS[5:])
        fields = [f'"{k}": {json.dumps(list(v) if isinstance(v := getattr(e, k), tuple) else v)}'
                  for k in keys]  # "flaky" and "cpu" only when set; case in the spec's key order
        body = ",\n      ".join(fields)
        lines.append("    {\n      " + body + "\n    }" + ("," if n < len(items) - 1 else ""))
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def default_baseline() -> dict[tuple[str, str], BaselineEntry] | None:
    """reports/baseline.json under the current directory when it exists and parses, else None."""
    if not os.path.exists(DEFAULT_BASELINE):
        return None
    try:
        return load_baseline(DEFAULT_BASELINE)
    except BaselineError as exc:
        print(f"normdiff: warning: known failures not marked: {exc}", file=sys.stderr)
        return None


# -- classification -----------------------------------------------------------

def judge(record: dict, entry: BaselineEntry | None) -> str:
    """The status of one result record given its baseline entry (or None)."""
    holds = entry.holds_on(record) if entry else True
    if holds is False:  # a failure of other machines: judged as if not listed
        entry = None
    if entry and entry.flaky:
        return Status.FLAKY
    if holds is None and record["verdict"] == Verdict.PASS:  # the record names no CPU: passing is known too
        return Status.PASS
    if record["verdict"] == Verdict.PASS:
        return Status.FIXED if entry else Status.PASS
    if entry and record["verdict"] == entry.verdict and not outputs_differ(record, entry):
        return Status.XFAIL
    return Status.NEW_FAIL


def outputs_differ(record: dict, entry: BaselineEntry) -> bool:
    """Whether an execution of several outputs fails on other outputs, or otherwise, than its entry expects (an
    entry without `outputs` judges the execution's verdict alone)."""
    got = failing_outputs(record)
    return entry.outputs is not None and got is not None and got != entry.outputs


def classify(records: list[dict], baseline: dict[tuple[str, str], BaselineEntry], subset: bool = False) -> list[Row]:
    """One row per execution in `records` (the last record wins) plus one per MISSING entry.

    With `subset` (a PR job, one shard), only the entries the results hold are
    judged: none is MISSING.
    """
    latest = {(r["case_id"], r["path"]): r for r in latest_per_execution(records)}
    rows = []
    for key, r in latest.items():
        entry = baseline.get(key)
        message = r.get("message") or ""
        if entry and outputs_differ(r, entry):
            message = f"failing outputs {failing_outputs(r)}, expected {entry.outputs}; {message}"
        rows.append(Row(judge(r, entry), r["case_id"], r["path"], r.get("case") or {}, r["verdict"],
                        entry.verdict if entry else Verdict.PASS, entry.upstream if entry else None,
                        entry.reason if entry else None, one_line(message)))
    for key, e in baseline.items():
        if key not in latest and not subset:
            rows.append(Row(Status.MISSING, e.case_id, e.path, e.case, None, e.verdict, e.upstream, e.reason))
    order = {s: i for i, s in enumerate(ROW_ORDER)}
    rows.sort(key=lambda w: (order[w.status], case_label(w.case, w.case_id), w.path))
    return rows


@dataclass(frozen=True)
class Retriage:
    """An entry whose verdict changed under `--update`, and what the triage rules made of it."""

    old: BaselineEntry
    new: BaselineEntry
    matched: bool  # a triage rule matched the new failure (else its reason is marked untriaged)

    @property
    def line(self) -> str:
        """One line for the update's output: the execution, old verdict -> new, the new upstream and reason."""
        how = "" if self.matched else " (no triage rule matches: upstream kept, reason marked untriaged)"
        return (f"re-triaged {self.new.path} {case_label(self.new.case, self.new.case_id)}: {self.old.verdict} -> "
                f"{self.new.verdict}: {self.new.upstream}: {self.new.reason}{how}")


@dataclass(frozen=True)
class Update:
    """What `--update` makes of a baseline: the new entries, and those re-triaged because their verdict changed."""

    entries: dict[tuple[str, str], BaselineEntry]
    retriaged: tuple[Retriage, ...]


def _untriaged(r: dict) -> str:
    """The reason of a failure no triage rule matches (an edit by hand is due)."""
    return one_line(f"untriaged: {r['verdict']}: {r.get('message') or ''}")


def _retriaged(r: dict, old: BaselineEntry) -> tuple[str, str, tuple[str, ...], bool]:
    """(upstream, reason, cpu, matched) of an entry whose verdict changed: the first matching triage rule's, else
    the old upstream and CPU features kept with the reason marked untriaged (the old reason said why the old
    verdict came; it is kept after "was", unless it was untriaged itself)."""
    rule = rule_of(r)
    if rule:
        return rule.upstream, rule.reason, rule.cpu, True
    if old.reason.startswith("untriaged:"):
        return old.upstream, _untriaged(r), old.cpu, False
    return old.upstream, f"untriaged: now {r['verdict']}, was {old.verdict}: {old.reason}", old.cpu, False


def update(records: list[dict], baseline: dict[tuple[str, str], BaselineEntry]) -> Update:
    """The baseline the results call for: every failing execution, its entry's upstream and reason kept while its
    verdict stays.

    A failure new to the baseline, and an entry whose verdict changed (a
    re-triage), take their upstream report, reason and CPU features from the
    triage rules (cases/triage.py); a new failure no rule matches is marked
    "untriaged" with upstream "new", a changed entry keeps its upstream and
    its reason is marked "untriaged" (`_retriaged`). Flaky entries, and
    entries of CPUs the results were not run on, are kept as they are.
    """
    out: dict[tuple[str, str], BaselineEntry] = {}
    retriaged: list[Retriage] = []
    for r in records:
        key = (r["case_id"], r["path"])
        old = baseline.get(key)
        if old and old.holds_on(r) is not True:  # a failure of machines these results were not run on: kept
            out[key] = old
            continue
        if old and old.flaky:  # a flaky entry stays, with its last failing verdict
            verdict = old.verdict if r["verdict"] == Verdict.PASS else r["verdict"]
            out[key] = BaselineEntry(old.case_id, old.path, verdict, old.upstream, old.reason, old.case, True, old.cpu,
                                     old.outputs)
            continue
        if r["verdict"] == Verdict.PASS:
            out.pop(key, None)
            continue
        case = CaseSpec.from_dict(r["case"]).to_dict()
        matched = None
        if old and old.verdict == r["verdict"]:
            upstream, reason, cpu = old.upstream, old.reason, old.cpu
        elif old:
            upstream, reason, cpu, matched = _retriaged(r, old)
        elif rule := rule_of(r):
            upstream, reason, cpu = rule.upstream, rule.reason, rule.cpu
        else:
            upstream, reason, cpu = "new", _untriaged(r), ()
        out[key] = BaselineEntry(r["case_id"], r["path"], r["verdict"], upstream, reason, case, cpu=cpu,
                                 outputs=failing_outputs(r) or None)
        if matched is not None:
            retriaged.append(Retriage(old, out[key], matched))
    return Update(out, tuple(sorted(retriaged, key=lambda t: _entry_order(t.new))))


def updated(records: list[dict], baseline: dict[tuple[str, str], BaselineEntry]) -> dict[tuple[str, str], BaselineEntry]:
    """The entries of `update` (the new baseline alone)."""
    return update(records, baseline).entries


# -- the table ---------------------------------------------------------------

def table(rows: list[Row], verbose: bool = False) -> str:
    """The gate table: every row but PASS (all rows with verbose), then the totals."""
    shown = [w for w in rows if verbose or w.status != Status.PASS]
    header = ("STATUS", "PATH", "CASE", "VERDICT", "EXPECTED", "NOTE")
    cells = [(w.status, w.path, case_label(w.case, w.case_id), w.verdict or "-", w.expected, w.note)
             for w in shown]
    widths = [max(len(header[i]), *(len(c[i]) for c in cells)) if cells else len(header[i])
              for i in range(len(header) - 1)]
    out = []
    for c in [header] + cells:
        out.append("  ".join(v.ljust(widths[i]) for i, v in enumerate(c[:-1])) + "  " + c[-1])
    counts = {s: sum(w.status == s for w in rows) for s in STATUSES}
    out.append("")
    out.append("total: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES))
    return "\n".join(out) + "\n"
