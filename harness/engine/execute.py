"""One execution: a case through one path, scored, as a result record (DESIGN §4).

`Executor` keeps prepared artifacts keyed by (path, structure key), so cases
that differ only in their input reuse one compiled artifact; a worker process
holds one Executor for its whole life. With an `ArtifactCache` it first looks
for the artifact on disk (`restore`) and stores what it built (`artifact`);
records say where the artifact came from in `artifact_cache`: "hit" (restored
from disk), "miss" (built, and stored if the path could serialise it), "off"
(no cache), "unsupported" (the path keeps no artifacts). `execute(spec, path)`
is the one-shot form for scripts and tests.
"""
from __future__ import annotations

import inspect
import json
import time
from collections import OrderedDict
from typing import Any

import numpy as np

from harness import paths
from harness.attribution import ATTRIBUTED, annotate
from harness.core.verdicts import Verdict
from harness.engine.cache import ArtifactCache, Origin, cacheable
from harness.engine.cases import CaseProblem, Cases, lift_problem
from harness.oracle.compare import eager_row_errors, score
from harness.paths.base import Prepared, StageError, Unsupported, example_args, first_line, stage
from harness.spec import CaseSpec


_PATH_VERSIONS: dict[str, dict] = {}  # by path name: what every record of the path says (the metadata look-ups cost ms)


def _versions(path: str) -> dict:
    """numpy and every built-in path's packages, plus a plug-in path's own."""
    if path not in _PATH_VERSIONS:
        versions = paths.record_versions()
        try:
            extra = paths.get(path).packages
        except Exception:  # noqa: BLE001 - an unknown path gets its error record elsewhere
            return versions
        for dist in extra:
            versions.setdefault(dist, paths.installed_version(dist))
        _PATH_VERSIONS[path] = versions
    return dict(_PATH_VERSIONS[path])


def base_record(spec: CaseSpec, path: str) -> dict[str, Any]:
    """A record with every DESIGN §4 key, before the verdict is known."""
    return {
        "case_id": spec.case_id, "case": spec.to_dict(), "path": path, "verdict": None,
        "stage": None, "message": "", "max_abs_err": None, "max_rel_err": None,
        "max_ulp": None, "worst_row": None, "eager_max_abs_err": None,
        "out_dtype": None, "expected_dtype": None, "seconds": 0.0,
        "versions": _versions(path), "structure_key": None, "cache_hit": False,
        "prepare_seconds": 0.0, "run_seconds": 0.0, "facts": {}, "artifact_cache": None,
    }


class Executor:
    """Runs executions in this process, reusing prepared artifacts (and the disk cache, if given)."""

    def __init__(self, cache: ArtifactCache | None = None, exports: "ExportMemo | None" = None,
                 cases: Cases | None = None):
        self.cache = cache
        self.exports = exports if exports is not None else ExportMemo()
        self.cases = cases if cases is not None else Cases()
        self._prepared: dict[tuple[str, str], tuple[Prepared | Exception, str]] = {}
        self.hits = 0
        self.misses = 0

    def _prepare(self, path, spec: CaseSpec, setup) -> tuple[Prepared | Exception, bool, float, str]:
        """(artifact or its exception, reused in memory, seconds, where it came from)."""
        key = (path.name, path.structure_key(spec))
        if key in self._prepared:
            self.hits += 1
            return (*self._prepared[key][:1], True, 0.0, self._prepared[key][1])
        self.misses += 1
        start = time.perf_counter()
        salt = setup.module_case.digest if setup.module_case is not None else ""
        prepared, origin = self._from_disk(path, spec, salt)
        if prepared is None:
            prepared = self._build(path, spec, setup)
            origin = self._store(path, spec, prepared, salt) if origin == Origin.MISS else origin
        self._prepared[key] = (prepared, origin)
        return prepared, False, time.perf_counter() - start, origin

    def _from_disk(self, path, spec: CaseSpec, salt: str = "") -> tuple[Prepared | None, str]:
        """The cached artifact restored, or None and what the cache status will be."""
        if self.cache is None:
            return None, Origin.OFF
        if not cacheable(path):
            return None, Origin.UNSUPPORTED
        ckey = self.cache.key(path, spec, salt)
        entry = self.cache.get(ckey)
        if entry is None:
            return None, Origin.MISS
        try:
            prepared = path.restore(spec, entry.data)
        except Exception:  # noqa: BLE001 - an entry that does not restore is not trusted
            self.cache.discard(ckey)
            return None, Origin.MISS
        prepared.facts = dict(entry.facts)
        return prepared, Origin.HIT

    def _store(self, path, spec: CaseSpec, prepared: Prepared | Exception, salt: str = "") -> str:
        """Put what was built into the cache: "miss", or "unsupported" if the path could not serialise it."""
        if isinstance(prepared, Exception):
            return Origin.MISS  # failures are rebuilt every time: they may come from the moment
        try:
            data = path.artifact(prepared)
            facts = json.loads(json.dumps(prepared.facts))
        except Exception:  # noqa: BLE001 - e.g. no C compiler to link TVM's library
            data = None
        if data is None:
            return Origin.UNSUPPORTED
        self.cache.put(self.cache.key(path, spec, salt), path.name, data, facts)
        return Origin.MISS

    def _build(self, path, spec: CaseSpec, setup) -> Prepared | Exception:
        try:
            module, example = setup.build()
            if not takes_exported(path):
                return path.prepare(spec, module, example)
            exported = self.exports.get(spec, module, example)
            if isinstance(exported, StageError):
                return exported  # the export failed: what the path's own export would have said
            return path.prepare(spec, module, example, exported=exported)
        except (StageError, Unsupported) as exc:
            return exc
        except Exception as exc:  # noqa: BLE001 - a path bug is still one record
            return StageError("compile", first_line(exc))

    def _eager(self, spec: CaseSpec, setup) -> np.ndarray | None:
        prepared = self._prepare(paths.get("eager"), spec, setup)[0]
        if isinstance(prepared, Exception):
            return None
        try:
            return prepared.run(setup.inputs.run_arg)
        except StageError:
            return None

    def execute(self, spec: CaseSpec | dict, path_name: str, attribute: bool = True) -> dict[str, Any]:
        """The result record of `spec` through path `path_name` (a failing one attributed, unless not `attribute`)."""
        spec = CaseSpec.from_dict(spec)
        record = base_record(spec, path_name)
        start = time.perf_counter()
        from harness.modules import LIFT

        if path_name == LIFT:
            return self._resolve(spec, record, start)
        try:
            path = paths.get(path_name)
        except KeyError as exc:
            record.update(verdict=Verdict.ERROR, stage="compile", message=str(exc.args[0]))
            return record
        try:
            setup = self.cases.setup(spec)
            record.update(setup.record)
            problem = lift_problem(record) if spec.is_module else None
            if problem is not None:
                raise problem
        except CaseProblem as exc:
            record.update(verdict=exc.verdict, stage=exc.stage, message=exc.message,
                          seconds=round(time.perf_counter() - start, 6))
            return record
        inputs, ref = setup.inputs, setup.ref
        if setup.module_case is not None:  # the lift exported this very module: every path may start from it
            self.exports.seed(spec, setup.module_case.exported)
        record["structure_key"] = path.structure_key(spec)
        record["expected_dtype"] = ref.out_dtype
        record["rounding_dtype"] = ref.rounding_dtype

        eager_out = self._eager(spec, setup) if path_name != "eager" else None
        if eager_out is not None:
            record["eager_max_abs_err"] = eager_row_errors(eager_out, ref)
            record["expected_dtype"] = str(eager_out.dtype)

        prepared, hit, prep_s, origin = self._prepare(path, spec, setup)
        record["cache_hit"] = hit
        record["artifact_cache"] = origin
        record["prepare_seconds"] = round(prep_s, 6)
        if isinstance(prepared, Unsupported):
            record.update(verdict=Verdict.UNSUPPORTED, message=str(prepared))
        elif isinstance(prepared, StageError):
            record.update(verdict=Verdict.ERROR, stage=prepared.stage, message=prepared.message)
        else:
            record["facts"] = dict(prepared.facts)
            run_start = time.perf_counter()
            try:
                out = prepared.run(inputs.run_arg)
            except StageError as exc:
                record.update(verdict=Verdict.ERROR, stage=exc.stage, message=exc.message)
            else:
                record["run_seconds"] = round(time.perf_counter() - run_start, 6)
                result = score(out, ref, eager_out)
                record.update({k: v for k, v in result.to_dict().items()})
                if path_name == "eager":
                    record["eager_max_abs_err"] = result.max_abs_err
        record["seconds"] = round(time.perf_counter() - start, 6)
        if attribute and record["verdict"] in ATTRIBUTED:  # a wrong output was scored: which stage lost it (passes pay nothing)
            annotate(record, spec, path, inputs, out, setup.module_case)
        return record

    def _resolve(self, spec: CaseSpec, record: dict, start: float) -> dict:
        """A module case resolved before any path runs (the pseudo path LIFT): pass with the lifted program,
        or the problem a bad spec (stage `spec`), an op outside the language, or a failed export gives."""
        try:
            case = self.cases.module_case(spec)
        except CaseProblem as exc:
            record.update(verdict=exc.verdict, stage=exc.stage, message=exc.message)
        else:
            record.update(verdict=Verdict.PASS, message="lifted", program=case.resolved.source,
                          lifted=case.resolved.to_dict(), lifted_pattern=case.resolved.pattern,
                          param_values=case.constant_values(), param_arrays=encode_arrays(case.param_arrays()))
        record["seconds"] = round(time.perf_counter() - start, 6)
        return record


def encode_arrays(arrays: dict) -> dict:
    """Arrays as plain data (base64 bytes, dtype, shape): a module case's parameter values in its LIFT record."""
    import base64

    from harness.core.dtypes import name_of

    return {n: {"dtype": name_of(a.dtype), "shape": list(a.shape),
                "data": base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()} for n, a in arrays.items()}


EXPORT_MEMO_SIZE = 4  # structures whose exported program a worker keeps for the paths still to come


class ExportMemo:
    """torch.export once per structure for every path that takes an exported program.

    The consumers (TVM's importer, to_edge, to_edge_transform_and_lower,
    ep.module()) were checked to leave the program unchanged (graph code,
    signature, state dict, constants), and an export under no_grad gives the
    same graph as one with grad enabled on the nightly's structures, so the
    paths see exactly what their own export gives them. It outlives a worker's
    artifacts (groups of one structure's paths follow each other), holding
    the last EXPORT_MEMO_SIZE structures.
    """

    def __init__(self, size: int = EXPORT_MEMO_SIZE):
        self.size = size
        self._programs: OrderedDict[str, object] = OrderedDict()
        self.hits = 0

    def seed(self, spec: CaseSpec, program) -> None:
        """Keep an export made elsewhere for `spec`'s structure (a module case's, made to lift it)."""
        key = spec.structure_key()
        if key not in self._programs:
            self._programs[key] = program
            while len(self._programs) > self.size:
                self._programs.popitem(last=False)

    def get(self, spec: CaseSpec, module, example):
        """The ExportedProgram of `spec`'s structure, or the StageError its export raised."""
        key = spec.structure_key()
        if key in self._programs:
            self._programs.move_to_end(key)
            self.hits += 1
            return self._programs[key]
        import torch

        try:
            with stage("export"), torch.no_grad():
                program = torch.export.export(module, example_args(example))
        except StageError as exc:
            program = exc
        self._programs[key] = program
        while len(self._programs) > self.size:
            self._programs.popitem(last=False)
        return program


_TAKES_EXPORTED: dict[type, bool] = {}


def takes_exported(path) -> bool:
    """Whether `path.prepare` accepts the keyword `exported` (an ExportedProgram made for it)."""
    cls = type(path)
    if cls not in _TAKES_EXPORTED:
        try:
            _TAKES_EXPORTED[cls] = "exported" in inspect.signature(path.prepare).parameters
        except (TypeError, ValueError):
            _TAKES_EXPORTED[cls] = False
    return _TAKES_EXPORTED[cls]


_DEFAULT: Executor | None = None


def execute(spec: CaseSpec | dict, path_name: str) -> dict[str, Any]:
    """One execution in this process (artifacts cached for the process's life)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Executor()
    return _DEFAULT.execute(spec, path_name)
