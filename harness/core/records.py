"""Result records: the typed `Record` of one execution, and its file, JSON Lines appended and flushed one by one.

A `Record` is what one execution of a case on a path produces: its verdict,
the score of its output, its timings and provenance, a module case's lift
facts, and the attribution of a failure. Every producer builds it through a
constructor (`Record.failed`, `Record.scored`, …) and later additions go
through `dataclasses.replace`. It becomes JSON only when written
(`ResultsWriter`, `Record.to_dict`) and is read back with `Record.from_dict`;
the keys on disk, their order and their values are the record format of
docs/contracts.md, unchanged by this type (a file written before it reads the
same). A Record also reads as the mapping of its on-disk keys (`r["verdict"]`,
`r.get("message")`), so code that reads records read from a file reads live
ones the same way.

A run killed at any moment leaves every finished record readable (`read_results` skips a torn last line).
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from typing import Any, Iterable, Iterator

from harness.core.verdicts import NO_OUTPUT, WRONG_OUTPUT, Verdict, worst


def json_safe(value: Any) -> Any:
    """JSON has no NaN/Infinity: non-finite floats become null. A Record becomes its JSON object."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Record):
        value = value.to_dict()
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def dumps(record: "Record | dict") -> str:
    return json.dumps(json_safe(record), sort_keys=False, separators=(", ", ": "), allow_nan=False)


def one_line(text: str, limit: int = 200) -> str:
    """`text` folded onto one line of at most `limit` characters (for tables and stderr)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


TMP_PREFIX = ".tmp-"  # a file being written, renamed into place when whole (cleaners skip or reap these)


def temporary_file(folder: str, name: str = "", mode: int = 0o666) -> tuple[int, str]:
    """A new file in `folder` (named after `name`), open for writing, with `mode` less the umask.

    The kernel applies the umask as it does for open(), so nothing reads or
    changes the process-wide umask (tempfile.mkstemp would give 0600 instead).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(folder, TMP_PREFIX + secrets.token_hex(6) + (f"-{name}" if name else ""))
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name in {folder}")


def write_atomic(path: str, text: str, mode: int = 0o666) -> str:
    """Write `text` to `path` through a temporary file renamed into place.

    A kill or a full disk mid-write leaves the old file whole, never a torn one.
    The file's mode is `mode` less the umask, as a plain open() would give it
    (0644 under umask 022), so reports stay readable on a shared folder.
    """
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = temporary_file(folder, os.path.basename(path), mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    return path


# -- the record of one execution ----------------------------------------------------------------------------

# The keys every record has, in their order on disk (docs/contracts.md §4), before the optional ones.
BASE_KEYS = ("case_id", "case", "path", "verdict", "stage", "message", "max_abs_err", "max_rel_err", "max_ulp",
             "worst_row", "eager_max_abs_err", "out_dtype", "expected_dtype", "seconds", "versions", "cpu",
             "structure_key", "cache_hit", "prepare_seconds", "run_seconds", "facts", "artifact_cache")
# The keys that say how long an execution took and where its artifact came from, not what it gave.
PROVENANCE = ("seconds", "prepare_seconds", "run_seconds", "attribution_seconds", "cache_hit", "artifact_cache",
              "ray_node")


@dataclass(frozen=True)
class OutputScore:
    """One output scored against its FP64 reference (harness.oracle.compare): a record carries one per output.

    `max_abs_err` … `out_dtype` are base keys (null in a record with no score); the last three are on disk only
    when the output was scored."""
    max_abs_err: float | None
    max_rel_err: float | None
    max_ulp: float | None
    worst_row: int | None
    out_dtype: str | None
    max_err_over_tol: float | None
    unstable: bool = False
    rows_over: int = 0
    # The output's name in a record of several (its program's returned name, or its position); the output's
    # verdict and message there too, since the record's own are those of the output that set it.
    name: str | None = None
    verdict: str | None = None
    message: str | None = None

    FLAT = ("max_abs_err", "max_rel_err", "max_ulp", "worst_row", "out_dtype")  # among the base keys
    EXTRA = ("max_err_over_tol", "unstable", "rows_over")  # after rounding_dtype
    OWN = ("name", "verdict", "message")  # in an `outputs` entry only

    @classmethod
    def of(cls, scored) -> "OutputScore":
        """The score of harness.oracle.compare.score (any object with these attributes)."""
        return cls(**{f.name: getattr(scored, f.name) if f.name not in cls.OWN else getattr(scored, f.name, None)
                      for f in fields(cls)})

    def to_dict(self) -> dict:
        """An entry of a record's `outputs`: its name, verdict and message, then its score's keys."""
        return {k: getattr(self, k) for k in self.OWN + self.FLAT + self.EXTRA}


@dataclass(frozen=True)
class LiftCheck:
    """A module case's execution: its lifted program and how far that program is from the module's own
    float64 run (harness.modules)."""
    program: str
    lifted_pattern: str | None
    lift_check: float | None
    lift_check_over_bound: float | None
    lift_note: str | None

    KEYS = ("program", "lifted_pattern", "lift_check", "lift_check_over_bound", "lift_note")

    def problem(self, share_limit: float) -> str | None:
        """Why the case's reference is not trusted (the lift and the module disagree by more than
        `share_limit` of the bound), or None."""
        share = self.lift_check_over_bound
        if share is None or share <= share_limit:
            return None
        return (f"the lifted program disagrees with the module run in float64: {self.lift_check:.3g} relative, "
                f"{share:.3g}x its bound (over {share_limit:g}); its reference is not trusted")


@dataclass(frozen=True)
class Resolution:
    """The record of the pseudo path LIFT that passed: a module case's class resolved into a program."""
    program: str
    lifted: dict
    lifted_pattern: str | None
    param_values: dict
    param_arrays: dict
    module_digest: str  # what its artifacts' cache keys hold (scheduler.mark_cached)

    KEYS = ("program", "lifted", "lifted_pattern", "param_values", "param_arrays", "module_digest")


@dataclass(frozen=True)
class Attribution:
    """Which stage of a failing execution's graph lost the accuracy (harness.attribution); `stages` and
    `first_stage_over` are null when it was skipped or could not be done (the record's facts say why)."""
    stages: list | None
    first_stage_over: str | None
    note: str | None = None  # how the stages were read (not on disk when not attributed)
    seconds: float | None = None  # not on disk when skipped

    def to_dict(self) -> dict:
        out = {"attribution": self.stages, "first_stage_over": self.first_stage_over}
        if self.note is not None:
            out["attribution_note"] = self.note
        if self.seconds is not None:
            out["attribution_seconds"] = self.seconds
        return out


@dataclass(frozen=True)
class StaticControl:
    """A symbolic execution that did not pass, run again compiled at its own sizes (spec.static(), the same path)."""
    verdict: str
    max_abs_err: float | None
    max_err_over_tol: float | None
    message: str
SYMBOLIC_ONLY, ALSO_STATIC = "symbolic only", "also static"  # a symbolic failure's scope, by its static control

def static_scope(record: Mapping) -> str | None:
    """"symbolic only" (its static control passes, or refuses what the symbolic compile ran to a wrong output),
    "also static" (it fails too), None without a control."""
    static = (record.get("static_control") or {}).get("verdict")
    own = static == Verdict.PASS or (static in NO_OUTPUT | {Verdict.UNSUPPORTED} and record["verdict"] in WRONG_OUTPUT)
    return None if static is None else SYMBOLIC_ONLY if own else ALSO_STATIC


@dataclass(frozen=True, eq=True)
class Record(Mapping):
    """What one execution produces (see the module's docstring); `to_dict` is its JSON object."""
    case_id: str
    case: dict
    path: str
    verdict: Verdict | str | None = None
    stage: str | None = None
    message: str = ""
    scores: tuple[OutputScore, ...] = ()  # one per output, in output order; empty when nothing was scored
    eager_max_abs_err: Any = None
    expected_dtype: str | None = None
    seconds: float = 0.0
    versions: dict = field(default_factory=dict)
    cpu: list | None = None
    structure_key: str | None = None
    cache_hit: bool = False
    prepare_seconds: float = 0.0
    run_seconds: float = 0.0
    facts: dict = field(default_factory=dict)
    artifact_cache: str | None = None
    resolution: Resolution | None = None
    lift: LiftCheck | None = None
    rounding_dtype: str | None = None
    signal: str | None = None  # a dead worker's
    log_tail: list | None = None  # a dead worker's last log lines
    attribution: Attribution | None = None
    memory_limit_gb: float | None = None  # an error that is a refused allocation: the limit that refused it
    ray_node: str | None = None
    static_control: StaticControl | None = None  # a symbolic case that did not pass: the same size, static
    extra: dict = field(default_factory=dict)  # keys of a file this version does not know, kept as read

    # -- constructors ---------------------------------------------------------------------------------------
    @classmethod
    def start(cls, spec, path: str, versions: dict, cpu: list | None) -> "Record":
        """A record with every base key, before the verdict is known."""
        return cls(spec.case_id, spec.to_dict(), path, versions=dict(versions), cpu=cpu)

    @classmethod
    def failed(cls, spec, path: str, verdict: Verdict, *, versions: dict, cpu: list | None, stage: str | None = None,
               message: str = "", seconds: float = 0.0, **more) -> "Record":
        """An execution that gave no scored output (an error, a crash, a timeout, unsupported)."""
        return replace(cls.start(spec, path, versions, cpu), verdict=verdict, stage=stage, message=message,
                       seconds=round(seconds, 6), **more)

    def fail(self, verdict: Verdict, stage: str | None, message: str, **more) -> "Record":
        """This record, ended by a failure at `stage`."""
        return replace(self, verdict=verdict, stage=stage, message=message, **more)

    def scored(self, score, *, run_seconds: float, eager_max_abs_err=None) -> "Record":
        """This record with the score of its output (harness.oracle.compare.score: verdict, message, errors)."""
        return replace(self, verdict=score.verdict, message=score.message, scores=(OutputScore.of(score),),
                       expected_dtype=score.expected_dtype, run_seconds=round(run_seconds, 6),
                       eager_max_abs_err=(self.eager_max_abs_err if eager_max_abs_err is None
                                          else eager_max_abs_err))

    def scored_each(self, scores, *, run_seconds: float, eager_max_abs_err=None) -> "Record":
        """This record with the scores of its several outputs: the verdict, message and flat score are those of
        the worst output (harness.core.verdicts.worst), every one listed in order. One score is `scored`."""
        if len(scores) == 1:
            return self.scored(scores[0], run_seconds=run_seconds, eager_max_abs_err=eager_max_abs_err)
        top = scores[worst(scores)]
        return replace(self.scored(top, run_seconds=run_seconds, eager_max_abs_err=eager_max_abs_err),
                       message=f"output {top.name}: {top.message}", scores=tuple(OutputScore.of(s) for s in scores))

    def with_fact(self, name: str, value) -> "Record":
        return replace(self, facts={**self.facts, name: value})

    # -- reading --------------------------------------------------------------------------------------------
    @property
    def score(self) -> OutputScore | None:
        """The score of the output that set the verdict (the only one, for a case of one); None when nothing
        was scored."""
        return self.scores[worst(self.scores)] if self.scores else None

    @property
    def verdict_output(self) -> str | None:
        """The name of the output that set the verdict of an execution of several outputs (derived from the
        scores by the one rule, harness.core.verdicts.worst); None for one."""
        return self.score.name if len(self.scores) > 1 else None

    @property
    def key(self) -> tuple[str, str]:
        return self.case_id, self.path

    def to_dict(self) -> dict:
        """The record's JSON object: the base keys, then each optional group that is present, in one order."""
        score = self.score
        flat = score.to_dict() if score is not None else {}
        out = {"case_id": self.case_id, "case": self.case, "path": self.path, "verdict": self.verdict,
               "stage": self.stage, "message": self.message}
        out.update({k: flat.get(k) for k in OutputScore.FLAT[:4]})
        out["eager_max_abs_err"] = self.eager_max_abs_err
        out["out_dtype"] = flat.get("out_dtype")
        out.update(expected_dtype=self.expected_dtype, seconds=self.seconds, versions=self.versions, cpu=self.cpu,
                   structure_key=self.structure_key, cache_hit=self.cache_hit, prepare_seconds=self.prepare_seconds,
                   run_seconds=self.run_seconds, facts=self.facts, artifact_cache=self.artifact_cache)
        if self.resolution is not None:
            out.update((k, getattr(self.resolution, k)) for k in Resolution.KEYS)
        if self.lift is not None:
            out.update((k, getattr(self.lift, k)) for k in LiftCheck.KEYS)
        if self.rounding_dtype is not None:
            out["rounding_dtype"] = self.rounding_dtype
        if score is not None:
            out.update((k, flat[k]) for k in OutputScore.EXTRA)
            if len(self.scores) > 1:  # several outputs: the verdict's flat as for one, every one listed
                out["outputs"] = [s.to_dict() for s in self.scores]
                out["verdict_output"] = self.verdict_output
        for name in ("signal", "log_tail"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.attribution is not None:
            out.update(self.attribution.to_dict())
        for name in ("memory_limit_gb", "ray_node"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.static_control is not None:
            out["static_control"] = asdict(self.static_control)
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "Record":
        """The Record of a JSON object `to_dict` wrote, or a file of an earlier version wrote (keys this
        version does not know are kept in `extra`, written back after the others)."""
        known = {"outputs", "verdict_output", *BASE_KEYS, *OutputScore.EXTRA, *LiftCheck.KEYS, *Resolution.KEYS, "rounding_dtype",
                 "signal", "log_tail", "attribution", "first_stage_over", "attribution_note", "attribution_seconds",
                 "memory_limit_gb", "ray_node", "static_control"}
        verdict = d.get("verdict")
        if isinstance(verdict, str) and verdict in Verdict._value2member_map_:
            verdict = Verdict(verdict)
        scores: tuple[OutputScore, ...] = ()
        if isinstance(d.get("outputs"), list):  # `verdict_output` is derived from them
            scores = tuple(OutputScore(**s) for s in d["outputs"])
        elif "max_err_over_tol" in d:
            scores = (OutputScore(**{k: d.get(k) for k in OutputScore.FLAT + OutputScore.EXTRA}),)
        attribution = None
        if "attribution" in d or "first_stage_over" in d:
            attribution = Attribution(d.get("attribution"), d.get("first_stage_over"), d.get("attribution_note"),
                                      d.get("attribution_seconds"))
        plain = {name: d.get(name) for name in (
            "stage", "eager_max_abs_err", "expected_dtype", "cpu", "structure_key", "artifact_cache",
            "rounding_dtype", "signal", "log_tail", "memory_limit_gb", "ray_node")}
        return cls(d["case_id"], d["case"], d["path"], verdict=verdict, message=d.get("message", ""),
                   scores=scores, seconds=d.get("seconds", 0.0), versions=d.get("versions", {}),
                   cache_hit=d.get("cache_hit", False), prepare_seconds=d.get("prepare_seconds", 0.0),
                   run_seconds=d.get("run_seconds", 0.0), facts=d.get("facts", {}),
                   resolution=(Resolution(**{k: d[k] for k in Resolution.KEYS})
                               if all(k in d for k in Resolution.KEYS) else None),
                   lift=LiftCheck(**{k: d[k] for k in LiftCheck.KEYS}) if all(k in d for k in LiftCheck.KEYS) else None,
                   attribution=attribution, static_control=(StaticControl(**d["static_control"])
                                                                   if d.get("static_control") else None),
                   extra={k: v for k, v in d.items() if k not in known}, **plain)

    # -- the mapping of its on-disk keys (readers of files and of live records read both alike) ---------------
    @cached_property
    def _view(self) -> dict:
        return self.to_dict()

    def __getitem__(self, key: str):
        return self._view[key]

    def __iter__(self):
        return iter(self._view)

    def __len__(self) -> int:
        return len(self._view)

    def __eq__(self, other):  # as its JSON object: equal to another Record, or to the dict read back of it
        if isinstance(other, Record):
            return self.to_dict() == other.to_dict()
        if isinstance(other, Mapping):
            return self.to_dict() == dict(other)
        return NotImplemented

    __hash__ = None


class ResultsWriter:
    """Appends records to a JSONL file, flushing after each one."""

    def __init__(self, path: str):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.path = path
        self._fh = open(path, "a", encoding="utf-8")

    def write(self, record: "Record | dict") -> None:
        self._fh.write(dumps(record) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def iter_results(path: str) -> Iterator[dict]:
    """Records of a results file, skipping a torn or blank line."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and "case_id" in record and "path" in record:
                yield record


def read_results(path: str) -> list[dict]:
    return list(iter_results(path))


def failing_outputs(record: Mapping) -> dict[str, str] | None:
    """{output name: verdict} of the outputs that did not pass, of an execution of several outputs (read from its
    `outputs`); None for an execution of one output or none scored (the gate's baseline keeps it, see
    harness.reports.baseline)."""
    outputs = record.get("outputs")
    if not isinstance(outputs, list):
        return None
    return {o["name"]: o["verdict"] for o in outputs if o.get("verdict") != Verdict.PASS}


def latest_per_execution(records: Iterable[dict]) -> list[dict]:
    """One record per (case_id, path): the last one written wins."""
    table: dict[tuple[str, str], dict] = {}
    for r in records:
        table[(r["case_id"], r["path"])] = r
    return list(table.values())
