"""Run history: every run's and merge's records, appended to one SQLite file (stdlib sqlite3).

The JSONL files stay the primary output; this file answers what they cannot
alone: when did an execution first fail, when did it last pass, under which
library versions, and how often does a path pass over the nights. Each run
is one transaction, so a reader never sees half a run. Several processes
may append at once (shards on one machine, a run and a merge): the database
is in WAL mode and every connection waits (busy timeout) instead of failing.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone

from harness.core.verdicts import Verdict
from harness.reports.baseline import case_label
from harness.reports.families import family_label, family_of
from harness.reports.known import Known

HISTORY_FILE = "history.sqlite"  # the default history's name: in the output folder of the runs it records


def default_history(out_dir: str) -> str:
    """The history a run or merge into `out_dir` appends to unless told otherwise: one in that folder,
    so a run leaves nothing outside its output folder (and the artifact cache)."""
    return os.path.join(out_dir, HISTORY_FILE)

SCHEMA_VERSION = "1"
BUSY_TIMEOUT_S = 60.0

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT NOT NULL, kind TEXT NOT NULL,
        out_dir TEXT, host TEXT, pid INTEGER, versions TEXT NOT NULL,
        executions INTEGER NOT NULL, passed INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS executions (
        run_id INTEGER NOT NULL REFERENCES runs(run_id), case_id TEXT NOT NULL, path TEXT NOT NULL,
        label TEXT, verdict TEXT NOT NULL, family TEXT, upstream TEXT, pattern TEXT, dtype TEXT,
        max_err_over_tol REAL, message TEXT)""",
    "CREATE INDEX IF NOT EXISTS executions_key ON executions(case_id, path)",
    "CREATE INDEX IF NOT EXISTS executions_family ON executions(family)",
    "CREATE INDEX IF NOT EXISTS executions_run ON executions(run_id)",
)


class HistoryError(Exception):
    """The history file cannot be used; the message is one line."""


def _retry(fn, what: str):
    """`fn()`, retried while another process holds the database (beyond sqlite's own busy wait)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                raise HistoryError(f"{what}: {exc}") from None
            time.sleep(0.05)


@contextlib.contextmanager
def _transaction(con: sqlite3.Connection, path: str):
    _retry(lambda: con.execute("BEGIN IMMEDIATE"), path)
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    _retry(lambda: con.execute("COMMIT"), path)


def connect(path: str, create: bool = True) -> sqlite3.Connection:
    """A connection to the history at `path` (created with its schema when `create`); HistoryError if unusable."""
    if not create and not os.path.isfile(path):
        raise HistoryError(f"{path}: no run history there (run and merge record one in their --out folder, "
                           f"or in --history FILE)")
    if os.path.isdir(path):
        raise HistoryError(f"{path} is a folder, not a history file")
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        con = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        _retry(lambda: con.execute("PRAGMA journal_mode=WAL").fetchone(), path)
        con.execute("PRAGMA synchronous=NORMAL")
        if create:
            with _transaction(con, path):
                for statement in _SCHEMA:
                    con.execute(statement)
                con.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        (version,) = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except (sqlite3.DatabaseError, OSError) as exc:
        raise HistoryError(f"{path}: not a normdiff history ({exc})") from None
    if version != SCHEMA_VERSION:
        con.close()
        raise HistoryError(f"{path}: history schema {version}, this normdiff reads {SCHEMA_VERSION}")
    return con


def run_versions(records: list[dict]) -> dict[str, str]:
    """The library versions of a run: for each library, the version most of its records carry."""
    seen: dict[str, Counter] = defaultdict(Counter)
    for r in records:
        for k, v in (r.get("versions") or {}).items():
            if v is not None:
                seen[k][v] += 1
    return {k: c.most_common(1)[0][0] for k, c in sorted(seen.items())}


def append(path: str, records: list[dict], *, kind: str, out_dir: str, baseline: dict | None = None) -> int:
    """Append one run (its records, one per execution) as one transaction; return its run id.

    Each failing record, and each record the baseline knows, is stored with
    its family (the baseline's upstream and reason, else the triage rule's).
    """
    known = Known(baseline)
    rows = []
    for r in records:
        family = upstream = None
        if r["verdict"] != Verdict.PASS or known.entry(r) is not None:
            upstream, reason = family_of(r, known)
            family = family_label(upstream, reason)
        case = r.get("case") or {}
        ratio = r.get("max_err_over_tol")
        rows.append((r["case_id"], r["path"], case_label(case, r["case_id"]), r["verdict"], family, upstream,
                     case.get("pattern"), case.get("dtype"), ratio if isinstance(ratio, (int, float)) else None,
                     (r.get("message") or "")[:500]))
    passed = sum(r["verdict"] == Verdict.PASS for r in records)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    con = connect(path)
    try:
        with _transaction(con, path):
            cur = con.execute("INSERT INTO runs (started, kind, out_dir, host, pid, versions, executions, passed) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                              (started, kind, out_dir, socket.gethostname(), os.getpid(),
                               json.dumps(run_versions(records), sort_keys=True), len(records), passed))
            run_id = cur.lastrowid
            con.executemany("INSERT INTO executions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [(run_id, *row) for row in rows])
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"{path}: cannot append ({exc})") from None
    finally:
        con.close()
    return run_id


def pass_rates(path: str) -> dict[str, list[tuple[int, str, int, int]]] | None:
    """Per path, (run_id, started, passing, executions) of every recorded run, oldest first; None without a file."""
    if not os.path.isfile(path):
        return None
    con = connect(path, create=False)
    try:
        rows = con.execute("SELECT e.run_id, r.started, e.path, SUM(e.verdict = ?), COUNT(*) "
                           "FROM executions e JOIN runs r USING (run_id) GROUP BY e.run_id, e.path "
                           "ORDER BY e.run_id", (str(Verdict.PASS),)).fetchall()
    finally:
        con.close()
    out: dict[str, list] = defaultdict(list)
    for run_id, started, p, passing, total in rows:
        out[p].append((run_id, started, passing, total))
    return dict(out) or None


@dataclass
class Run:
    run_id: int
    started: str
    kind: str
    out_dir: str
    versions: dict


@dataclass
class Execution:
    """One case × path across the recorded runs: (run_id, verdict, err/bound) oldest first."""

    case_id: str
    path: str
    label: str
    family: str | None = None
    seen: list[tuple[int, str, float | None]] = field(default_factory=list)

    @property
    def first_failed(self) -> int | None:
        return next((run for run, v, _ in self.seen if v != Verdict.PASS), None)

    @property
    def last_passed(self) -> int | None:
        return next((run for run, v, _ in reversed(self.seen) if v == Verdict.PASS), None)

    @property
    def failing_since(self) -> int | None:
        """The first run of the current failing streak (None when the last run passed)."""
        since = None
        for run, v, _ in reversed(self.seen):
            if v == Verdict.PASS:
                break
            since = run
        return since

    @property
    def last(self) -> tuple[int, str, float | None]:
        return self.seen[-1]


@dataclass
class Answer:
    """What the history says about a case or a family."""

    kind: str                      # "case" or "family"
    target: str
    families: list[str]
    executions: list[Execution]
    runs: dict[int, Run]


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def lookup(path: str, target: str) -> Answer:
    """The executions of a case (its case_id, or a unique prefix of 4+ hex digits) or of a family
    (an upstream report such as apache/tvm#20909, or words of its reason); HistoryError if none."""
    con = connect(path, create=False)
    try:
        kind, where, args = _target(con, target)
        rows = con.execute(
            "SELECT e.case_id, e.path, e.label, e.family, e.run_id, e.verdict, e.max_err_over_tol "
            "FROM executions e JOIN (SELECT DISTINCT case_id, path FROM executions WHERE " + where + ") k "
            "USING (case_id, path) ORDER BY e.case_id, e.path, e.run_id", args).fetchall()
        fams = [f for (f,) in con.execute("SELECT DISTINCT family FROM executions WHERE family IS NOT NULL AND "
                                          + where + " ORDER BY family", args)]
        runs = {r[0]: Run(r[0], r[1], r[2], r[3], json.loads(r[4])) for r in con.execute(
            "SELECT run_id, started, kind, out_dir, versions FROM runs")}
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"{path}: cannot read ({exc})") from None
    finally:
        con.close()
    table: dict[tuple[str, str], Execution] = {}
    for case_id, p, label, family, run_id, verdict, ratio in rows:
        ex = table.setdefault((case_id, p), Execution(case_id, p, label or case_id))
        ex.family = family or ex.family
        ex.seen.append((run_id, verdict, ratio))
    return Answer(kind, target, fams, list(table.values()), runs)


def _target(con: sqlite3.Connection, target: str) -> tuple[str, str, tuple]:
    text = target.strip()
    if not text:
        raise HistoryError("history: give a case_id or a family (an upstream report or words of its reason)")
    if 4 <= len(text) <= 12 and all(c in "0123456789abcdef" for c in text.lower()):
        ids = [c for (c,) in con.execute("SELECT DISTINCT case_id FROM executions WHERE case_id LIKE ? ESCAPE '\\'",
                                         (_escape_like(text.lower()) + "%",))]
        if len(ids) > 1:
            raise HistoryError(f"history: {text!r} is the start of {len(ids)} case ids ({', '.join(ids[:5])}…); "
                               "give more digits")
        if ids:
            return "case", "case_id = ?", (ids[0],)
    pattern = "%" + _escape_like(text) + "%"
    where = "(upstream = ? OR family = ? OR family LIKE ? ESCAPE '\\')"
    args = (text, text, pattern)
    if con.execute("SELECT 1 FROM executions WHERE " + where + " LIMIT 1", args).fetchone():
        return "family", where, args
    raise HistoryError(f"history: no recorded execution of a case or family matching {text!r}")
