"""One execution: a case through one path, scored, as a result record (docs/contracts.md §4).

`Executor` keeps prepared artifacts keyed by (path, structure key), so cases
that differ only in their input reuse one compiled artifact; a worker process
holds one Executor for its whole life. With an `ArtifactCache` it first looks
for the artifact on disk (`restore`) and stores what it built (`artifact`);
records say where the artifact came from in `artifact_cache`: "hit" (restored
from disk), "miss" (built, and stored if the path could serialise it), "off"
(no cache), "unsupported" (the path keeps no artifacts). A failure to build
that does not come from the moment, and the attribution of a failing
execution, are kept too (harness.engine.stored), so a warm run pays for
imports, runs and scoring. `execute(spec, path)` is the one-shot form for
scripts and tests.
"""
from __future__ import annotations

import json
import time
from dataclasses import replace

import numpy as np

from harness import paths
from harness.attribution import annotate
from harness.attribution.policy import Policy
from harness.attribution.stages import BackwardCase
from harness.core.machine import cpu_features
from harness.core.records import PROVENANCE, Record, Resolution, StaticControl
from harness.core.verdicts import Verdict
from harness.engine import stored
from harness.engine.cache import ArtifactCache, Origin
from harness.engine.cases import CaseProblem, Cases
from harness.engine.exports import ExportMemo
from harness.oracle.compare import as_outputs, eager_row_errors
from harness.oracle.outputs import score_each, worst
from harness.paths.base import Prepared, StageError, Unsupported, first_line
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


def _cpu() -> list[str] | None:
    """The machine's CPU features a result can depend on (harness.core.machine), or None if unknown."""
    features = cpu_features()
    return None if features is None else list(features)


def started(spec: CaseSpec, path: str) -> Record:
    """The record of `spec` on `path` before its verdict is known, with this process's provenance."""
    return Record.start(spec, path, _versions(path), _cpu())


def failed(spec: CaseSpec, path: str, verdict: Verdict, **kw) -> Record:
    """The record of an execution that gave no scored output (Record.failed), with this process's provenance."""
    return Record.failed(spec, path, verdict, versions=_versions(path), cpu=_cpu(), **kw)


def comparable(record: Record | dict) -> dict:
    """`record` without its PROVENANCE keys and its path's `cache_facts`: what a warm run gives exactly as the
    cold run that filled the caches did (verdict, errors, dtypes, facts, attribution)."""
    out = {k: v for k, v in record.items() if k not in PROVENANCE}
    try:
        drop = set(paths.get(record["path"]).cache_facts)
    except Exception:  # noqa: BLE001 - an unknown path has no cache facts
        drop = set()
    out["facts"] = {k: v for k, v in (record.get("facts") or {}).items() if k not in drop}
    return out


def refusal(spec: CaseSpec, path) -> str | None:
    """Why `path` refuses `spec` by what it declares, before the case is set up (one decision for both): a
    gradient case on a path that cannot train (`trains` None), a symbolic case on one that compiles static
    shapes only (`symbolic` None); None when it takes the case."""
    if spec.grad and path.trains is None:
        return path.cannot_train
    if spec.dynamic and path.symbolic is None:
        return f"symbolic dims: {path.cannot_symbolic}"
    return None


class Executor:
    """Runs executions in this process, reusing prepared artifacts (and the disk cache, if given).

    `policy` says which failures get an attribution (harness.attribution.policy: every one by default).
    """

    def __init__(self, cache: ArtifactCache | None = None, exports: ExportMemo | None = None,
                 cases: Cases | None = None, policy: Policy | None = None):
        self.cache = cache
        self.exports = exports if exports is not None else ExportMemo()
        self.cases = cases if cases is not None else Cases(cache)
        self.policy = policy if policy is not None else Policy()
        self._prepared: dict[tuple[str, str], tuple[Prepared | Exception, str]] = {}
        self.hits = 0
        self.misses = 0

    def fresh(self) -> "Executor":
        """The executor for a new group: the previous groups' artifacts dropped; the recent exports and
        cases (what the next paths of the same structure start from), the cache and the policy kept."""
        return Executor(self.cache, self.exports, self.cases, self.policy)

    def _prepare(self, path, spec: CaseSpec, setup) -> tuple[Prepared | Exception, bool, float, str]:
        """(artifact or its exception, reused in memory, seconds, where it came from)."""
        key = (path.name, path.structure_key(spec))
        if key in self._prepared:
            self.hits += 1
            return (*self._prepared[key][:1], True, 0.0, self._prepared[key][1])
        self.misses += 1
        start = time.perf_counter()
        salt = setup.module_case.digest if setup.module_case is not None else ""
        prepared, origin = self._from_disk(path, spec, salt, setup.build)
        if prepared is None:
            prepared = self._build(path, spec, setup)
            origin = self._store(path, spec, prepared, salt) if origin == Origin.MISS else origin
        self._prepared[key] = (prepared, origin)
        return prepared, False, time.perf_counter() - start, origin

    def _from_disk(self, path, spec: CaseSpec, salt: str = "", build=None) -> tuple[Prepared | Exception | None, str]:
        """The cached artifact restored (or the failure kept in its place), or None and what the cache
        status will be. A path whose restore takes `build` is handed the case's module builder; the facts
        are the kept ones, but for those its restore says of itself (its cache facts)."""
        if self.cache is None:
            return None, Origin.OFF
        if not path.artifact_cacheable:
            return None, Origin.UNSUPPORTED
        ckey = self.cache.key(path, spec, salt)
        entry = self.cache.get(ckey)
        if entry is None:
            return self._failure_from_disk(path, spec, salt)
        try:
            prepared = path.restore(spec, entry.data, **({"build": build} if path.restore_takes_build else {}))
        except Exception:  # noqa: BLE001 - an entry that does not restore is not trusted
            self.cache.discard(ckey)
            return None, Origin.MISS
        prepared.facts = {**entry.facts, **prepared.facts}
        return prepared, Origin.HIT

    def _failure_from_disk(self, path, spec: CaseSpec, salt: str) -> tuple[Exception | None, str]:
        fkey = self.cache.key(path, spec, salt, kind=stored.FAILURE)
        entry = self.cache.get(fkey)
        if entry is None:
            return None, Origin.MISS
        try:
            return stored.failure_of(entry.data), Origin.HIT
        except Exception:  # noqa: BLE001 - not a kept failure: dropped, and the artifact built
            self.cache.discard(fkey)
            return None, Origin.MISS

    def _store(self, path, spec: CaseSpec, prepared: Prepared | Exception, salt: str = "") -> str:
        """Put what was built into the cache: "miss", or "unsupported" if the path could not serialise it."""
        if isinstance(prepared, Exception):
            data = stored.failure_bytes(prepared)
            if data is not None:  # a failure that does not come from the moment: kept
                self.cache.put(self.cache.key(path, spec, salt, kind=stored.FAILURE), path.name, data, {})
            return Origin.MISS
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
            if not path.takes_shared_export:
                return path.prepare(spec, module, example)
            exported = self.exports.get(spec, module, example)
            if isinstance(exported, StageError):  # the path exports itself: its own error, or its own fallbacks
                return path.prepare(spec, module, example)
            return path.prepare(spec, module, example, exported=exported)
        except (StageError, Unsupported) as exc:
            return exc
        except Exception as exc:  # noqa: BLE001 - a path bug is still one record
            return StageError("compile", first_line(exc))

    def _eager(self, spec: CaseSpec, setup) -> np.ndarray | None:
        """Eager's output on the case (what every path is held to), run once for all the paths of the case."""
        if "out" not in setup.eager:
            prepared = self._prepare(paths.get("eager"), spec, setup)[0]
            out = None
            if not isinstance(prepared, Exception):
                try:
                    out = prepared.run(setup.inputs.run_arg)
                    for o in as_outputs(out):
                        o.setflags(write=False)
                except StageError:
                    out = None
            setup.eager["out"] = out
        return setup.eager["out"]

    def execute(self, spec: CaseSpec | dict, path_name: str, attribute: bool = True) -> Record:
        """The result record of `spec` through path `path_name` (a failing one attributed, unless not `attribute`)."""
        spec = CaseSpec.from_dict(spec)
        record = started(spec, path_name)
        start = time.perf_counter()
        from harness.modules import LIFT

        if path_name == LIFT:
            return self._resolve(spec, record, start)
        try:
            path = paths.get(path_name)
        except KeyError as exc:
            return record.fail(Verdict.ERROR, "compile", str(exc.args[0]))
        why = refusal(spec, path)
        if why is not None:  # declared: no setup (a gradient's lift, the reference), no eager, no prepare
            return record.fail(Verdict.UNSUPPORTED, None, why, seconds=round(time.perf_counter() - start, 6))
        try:
            setup = self.cases.setup(spec)
            record = replace(record, lift=setup.lift)
            if setup.problem is not None:
                raise setup.problem
        except CaseProblem as exc:
            return record.fail(exc.verdict, exc.stage, exc.message, seconds=round(time.perf_counter() - start, 6))
        inputs, ref = setup.inputs, setup.ref
        if setup.module_case is not None and setup.module_case.exported is not None and not spec.grad:
            self.exports.seed(spec, setup.module_case.exported)  # the lift exported this very module
        record = replace(record, structure_key=path.structure_key(spec), expected_dtype=ref.out_dtype,
                         rounding_dtype=ref.rounding_dtype)

        # a gradient is judged without eager (docs/gradients.md): eager is not run for the other paths' sake
        eager_out = self._eager(spec, setup) if path_name != "eager" and not spec.grad else None
        if eager_out is not None:
            record = replace(record, eager_max_abs_err=eager_row_errors(eager_out, ref),
                             expected_dtype=str(as_outputs(eager_out)[0].dtype))

        prepared, hit, prep_s, origin = self._prepare(path, spec, setup)
        record = replace(record, cache_hit=hit, artifact_cache=origin, prepare_seconds=round(prep_s, 6))
        out = None
        if isinstance(prepared, Unsupported):
            record = record.fail(Verdict.UNSUPPORTED, None, str(prepared))
        elif isinstance(prepared, StageError):
            record = record.fail(Verdict.ERROR, prepared.stage, prepared.message)
        else:
            run_start = time.perf_counter()
            try:
                out = prepared.run(inputs.run_arg)
            except StageError as exc:
                record = record.fail(Verdict.ERROR, exc.stage, exc.message)
            else:
                results = score_each(out, ref, eager_out)
                k = worst(results)
                eager_err = (results[k].max_abs_err if path_name == "eager" else
                             eager_row_errors(eager_out, ref, k) if eager_out is not None and k else None)
                record = record.scored_each(results, run_seconds=time.perf_counter() - run_start,
                                            eager_max_abs_err=eager_err)
            # read after the run: a fact may count what the runs did (`compiles`)
            record = replace(record, facts={**prepared.facts, **({"trains": path.trains} if spec.grad else {})})
        record = replace(record, seconds=round(time.perf_counter() - start, 6))
        # a wrong output: which stage lost it, if the policy says so (passes pay nothing); the symbolic compile's
        record = self.policy.apply(record, attribute, lambda r: self._attribute(r, spec, path, out, setup))
        return self._static_control(record, spec, path_name)

    def _static_control(self, record: Record, spec: CaseSpec, path_name: str) -> Record:
        """A symbolic execution that ran and did not pass, with the same size compiled statically on the same
        path (its own artifact, by the static structure key): does the failure need the symbolic compile? A
        failure the baseline expects gets none, as it gets no attribution (a compile per size is no news)."""
        if not spec.dynamic or record.verdict in (Verdict.PASS, Verdict.UNSUPPORTED) or not self.policy.wants(record):
            return record
        static = self.execute(spec.static(), path_name, attribute=False)
        return replace(record, static_control=StaticControl(
            str(Verdict(static.verdict).value), static.get("max_abs_err"), static.get("max_err_over_tol"),
            static.message))

    def _attribute(self, record: Record, spec: CaseSpec, path, out, setup) -> Record:
        """The attribution of a failing record: the one the cache keeps for this very execution, else
        computed (and kept). A gradient case's stages are its lifted backward's, its graph the Backward module's
        (BackwardCase: docs/attribution.md "The backward")."""
        start = time.perf_counter()
        salt = setup.module_case.digest if setup.module_case is not None else ""
        key = stored.attribution_key(self.cache, path, spec, salt, record.verdict, out) if self.cache else None
        entry = self.cache.get(key) if key else None
        if entry is not None:
            try:
                kept = stored.apply_attribution(record, entry.data)
            except Exception:  # noqa: BLE001 - not a kept attribution: dropped, and attributed again
                self.cache.discard(key)
                entry = None
            else:
                return replace(kept, attribution=replace(kept.attribution,
                                                         seconds=round(time.perf_counter() - start, 6)))
        backward = BackwardCase(setup.backward, setup.build) if spec.grad else None
        record = annotate(record, spec, path, setup.inputs, out, setup.module_case, backward)
        if key:
            self.cache.put(key, path.name, stored.attribution_bytes(record), {})
        return record

    def _resolve(self, spec: CaseSpec, record: Record, start: float) -> Record:
        """A module case resolved before any path runs (the pseudo path LIFT): pass with the lifted program,
        or the problem a bad spec (stage `spec`), an op outside the language, or a failed export gives."""
        try:
            case = self.cases.module_case(spec)
        except CaseProblem as exc:
            record = record.fail(exc.verdict, exc.stage, exc.message)
        else:
            record = replace(record, verdict=Verdict.PASS, message="lifted", resolution=Resolution(
                program=case.resolved.source, lifted=case.resolved.to_dict(), lifted_pattern=case.resolved.pattern,
                param_values=case.constant_values(), param_arrays=encode_arrays(case.param_arrays()),
                module_digest=case.digest))
        return replace(record, seconds=round(time.perf_counter() - start, 6))


def encode_arrays(arrays: dict) -> dict:
    """Arrays as plain data (base64 bytes, dtype, shape): a module case's parameter values in its LIFT record."""
    import base64

    from harness.core.dtypes import name_of

    return {n: {"dtype": name_of(a.dtype), "shape": list(a.shape),
                "data": base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()} for n, a in arrays.items()}


def executor_from_config(cfg, cache: ArtifactCache | None) -> Executor:
    """A worker's Executor (a process's or a Ray actor's) from the plain data its runner sends: the attribution
    policy, with the artifact cache the worker set the libraries' own caches under (use_library_caches_of,
    before its warm-ups)."""
    return Executor(cache, policy=Policy.from_config(cfg.policy))


_DEFAULT: Executor | None = None


def execute(spec: CaseSpec | dict, path_name: str) -> Record:
    """One execution in this process (artifacts cached for the process's life)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Executor()
    return _DEFAULT.execute(spec, path_name)
