"""normdiff from Python: `harness.check(...)` runs cases (a module case from a notebook or a test) and returns
their records: `harness.core.records.Record`s, each also read as the mapping of its keys on disk, whose
verdict is a `Verdict` (a StrEnum: equal to the string a results file holds).

    import harness
    records = harness.check("mypkg.norms:RMSNorm", init={"hidden_size": 64}, dtype="bfloat16",
                            paths=["eager", "executorch-recompose"])
    assert all(r["verdict"] == "pass" for r in records), records

The executions run in the runner's warm, isolated worker processes (forked
from this one, so a class defined in this process's __main__ works too);
a crashing compiler or class costs its record, not the caller. A bad spec or
class raises ValueError with the one line the command line prints.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.core.records import Record


def _spec(target, init, dtype, shape, **keys):
    from harness.spec import CaseSpec

    if isinstance(target, (dict, CaseSpec)):
        return CaseSpec.from_dict(target)
    if isinstance(target, type):
        target = f"{target.__module__}:{target.__qualname__}"
    raw = {"class": target, "dtype": dtype, "shape": list(shape), **{k: v for k, v in keys.items() if v is not None}}
    if init is not None:
        raw["init"] = init
    return CaseSpec.from_dict(raw)


def check(target, *, init: dict | None = None, dtype: str = "float32", shape=(2, 8, 64), inputs: dict | None = None,
          input: dict | None = None, params: dict | None = None, seed: int | None = None, pattern: str | None = None,
          weight_dtype: str | None = None, paths=None, jobs: int | None = None, timeout: float | None = None,
          out: str | None = None, cache: bool = True, reduce: str | None = None) -> list[Record]:
    """The records of `target` on `paths` (default every built-in path).

    `target` is a spec (dict or CaseSpec; a list of them runs them all), an
    nn.Module subclass, or "package.module:ClassName" with the module case's
    keys as keywords. `out` keeps results.jsonl there (default: a temporary
    folder, removed); `cache=False` builds every artifact afresh. `reduce`
    (a folder): each execution failing on a compiled path is reduced to the
    smallest program failing the same way (docs/reduce.md), written there as
    reduced-CASE_ID-PATH.json, and a line on stderr says where (or why not).
    """
    from harness import paths as registry
    from harness.core.errors import UsageError
    from harness.core.verdicts import DEFAULT_TIMEOUT
    from harness.engine.cache import ArtifactCache, default_dir, max_bytes_from_env
    from harness.engine.run import run
    from harness.spec import SpecError

    try:
        targets = target if isinstance(target, list) else [target]
        specs = [_spec(t, init, dtype, shape, inputs=inputs, input=input, params=params, seed=seed, pattern=pattern,
                       weight_dtype=weight_dtype) for t in targets]
        names = list(paths) if paths is not None else registry.default_names()
        for name in names:
            if name not in registry.names():
                raise UsageError(f"unknown path {name!r}; known: {', '.join(registry.names())}")
        store = ArtifactCache(default_dir(), max_bytes_from_env()) if cache else None
        with tempfile.TemporaryDirectory(prefix="normdiff-check-") as tmp:
            folder = out or tmp
            os.makedirs(folder, exist_ok=True)
            records = run(specs, names, folder, jobs=jobs, timeout=timeout or DEFAULT_TIMEOUT, progress=False,
                          cache=store)
    except (SpecError, UsageError) as exc:
        raise ValueError(str(exc)) from None
    if reduce is not None:
        _reduce_failures(records, specs, reduce, timeout or DEFAULT_TIMEOUT)
    return records


def check_model(target, *, init: dict | None = None, config: dict | None = None, dtype: str = "float32",
                shape=None, input: dict | None = None, tokens: int | None = None, seed: int = 0, paths=None,
                out: str | None = None, max_memory: float | None = None, outliers: float | None = None,
                outlier_channels=None, outlier_tokens=None, jobs: int | None = None, timeout: float | None = None):
    """`normdiff model` from Python (docs/models.md): every norm instance of a whole model, scored on `paths` with
    the input the model gives it. `target` is a class or factory (or "pkg.mod:Name"), or a transformers
    architecture's name with `config`. Returns a ModelResult: `.about` (the instances in model order, the whole
    model per path), `.records` (the instances' records), `.problem` (the capture stopped: one line, else None)
    and `.table` (the report). `out` keeps everything there (default: a temporary folder, removed). A bad
    argument raises ValueError with the command line's one line."""
    import types

    from harness.commands.model import run_model
    from harness.core.errors import UsageError
    from harness.core.verdicts import DEFAULT_TIMEOUT

    if isinstance(target, type) or callable(target) and not isinstance(target, str):
        target = f"{target.__module__}:{target.__qualname__}"
    args = types.SimpleNamespace(
        target=target, init=None if init is None else json.dumps(init), dtype=dtype,
        config=None if config is None else json.dumps(config), shape=None if shape is None else list(shape),
        input=None if input is None else json.dumps(input), tokens=tokens, seed=seed,
        paths=None if paths is None else ",".join(paths), max_memory=max_memory, outliers=outliers,
        outlier_channels=outlier_channels, outlier_tokens=outlier_tokens, jobs=jobs,
        timeout=timeout or DEFAULT_TIMEOUT, quiet=True)
    try:
        with tempfile.TemporaryDirectory(prefix="normdiff-model-") as tmp:
            args.out = out or tmp
            return run_model(args)
    except UsageError as exc:
        raise ValueError(str(exc)) from None


def _reduce_failures(records: list[Record], specs, folder: str, timeout: float) -> None:
    """Each failure on a compiled path reduced into `folder`, on warm workers (the path's and eager's)."""
    import sys

    from harness.core.verdicts import FAILING
    from harness.engine.pool import Pool
    from harness.search.reduce import CONTROL, KEEP_STRUCTURES, reduce_into

    by_id = {s.case_id: s for s in specs}
    failing = [r for r in records if r["verdict"] in FAILING and r["path"] != CONTROL and r["case_id"] in by_id]
    if not failing:
        return
    with Pool(sorted({r["path"] for r in failing}) + [CONTROL], timeout=timeout, keep=KEEP_STRUCTURES) as pool:
        for r in failing:
            line = reduce_into(folder, by_id[r["case_id"]], r["path"], pool.map)
            print(f"normdiff: {r['case_id']} on {r['path']}: {line}", file=sys.stderr)
