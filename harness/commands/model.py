"""`normdiff model TARGET`: every norm instance of a whole model, scored with the activations the model gives it.

The model (a class or factory with --init, or a transformers architecture with
--config and random weights) runs once in --dtype and once in float64 in a
worker; every norm instance's input is captured into OUT/captured/ by content
hash, and each instance becomes a module case (docs/contracts.md §8) naming its
`instance` and a `captured` input, run on every path against the FP64
evaluation of that instance on its own input (docs/models.md). The whole model
is compiled on each path too; its error sits beside eager's, without a verdict.
Exit 0 when every instance passes on every path, 1 otherwise (or when the
capture failed), 2 on bad usage.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import asdict, dataclass

from harness.commands.common import paths_arg
from harness.core import captured
from harness.core.errors import UsageError
from harness.core.records import read_results, write_atomic, latest_per_execution
from harness.core.verdicts import DEFAULT_TIMEOUT, Verdict
from harness.spec import CaseSpec, SpecError
from harness.spec.module_keys import CLASS_RE

DEFAULT_OUT = "reports/model"
DEFAULT_TOKENS = 8
# A transformers architecture's name without these endings is its config's name before "Config".
HEADS = ("ForCausalLM", "ForConditionalGeneration", "ForSequenceClassification", "ForMaskedLM", "Model")
MODEL_FILE = "model.json"
INSTANCES = "instances.jsonl"  # the instances' specs: `run --case`, pytest's --normdiff-case take them
LOG = "model-worker.log"  # the capture worker's stdout and stderr


def _json(flag: str, text: str | None):
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag}: expected a JSON object, got {text!r}")
    return value


def _ints(flag: str, values) -> list[int]:
    try:
        return [int(v) for item in values or () for v in str(item).replace(",", " ").split()]
    except ValueError:
        raise UsageError(f"{flag}: expected ints like 2 8 64, got {' '.join(map(str, values))!r}") from None


def target_of(args) -> tuple[str, dict]:
    """(the class or factory "pkg.mod:Name", its init) the arguments name; UsageError when bad."""
    name = args.target
    config = _json("--config", args.config)
    init = _json("--init", args.init) or {}
    if config is not None:
        if importlib.util.find_spec("transformers") is None:
            raise UsageError("--config builds a transformers architecture: install the zoo extra "
                             "(make install EXTRAS=zoo)")
        if ":" not in name:
            name = f"transformers:{name}"
        if "class" not in config:
            arch = name.rpartition(":")[2]
            stem = next((arch[: -len(h)] for h in HEADS if arch.endswith(h) and len(arch) > len(h)), arch)
            config = {"class": f"transformers:{stem}Config", **config}
        init = {**init, "config": config}
    if not CLASS_RE.match(name):
        raise UsageError(f"TARGET: expected \"package.module:Name\" (a class or factory), or a transformers "
                         f"architecture with --config, got {args.target!r}")
    return name, init


def model_spec(args) -> tuple[CaseSpec, int | None]:
    """(the model as a module case spec: how the worker builds it, the token count or None)."""
    name, init = target_of(args)
    if args.tokens is not None and (args.shape or args.input):
        raise UsageError("--tokens: give either token ids (--tokens N) or an input (--shape, --input), not both")
    tokens = args.tokens if args.tokens is not None else (DEFAULT_TOKENS if args.config and not args.shape else None)
    if tokens is not None and not 1 <= tokens <= 1 << 16:
        raise UsageError(f"--tokens: must be in [1, 65536], got {tokens}")
    raw = {"class": name, "init": init, "dtype": args.dtype, "seed": args.seed,
           "shape": [1, tokens] if tokens is not None else (_ints("--shape", args.shape) or [2, 8, 64])}
    if args.input:
        raw["input"] = _json("--input", args.input)
    try:
        return CaseSpec.from_dict(raw), tokens
    except SpecError as exc:
        raise UsageError(str(exc)) from None


def outliers_of(args):
    from harness.engine.model_capture import Outliers

    if args.outliers is None:
        return None
    if not args.outliers > 0:
        raise UsageError(f"--outliers: the scale must be > 0, got {args.outliers:g}")
    tokens = tuple(_ints("--outlier-tokens", args.outlier_tokens)) or (0,)
    return Outliers(float(args.outliers), tuple(_ints("--outlier-channels", args.outlier_channels)), tokens)


def instance_specs(spec: CaseSpec, instances) -> dict[str, CaseSpec]:
    """{module path: its module case} of every instance with a captured input (the model's class, init, seed)."""
    out = {}
    for inst in instances:
        if inst.sha256 is None:
            continue
        raw = {**{k: v for k, v in spec.to_dict().items() if k in ("class", "init", "seed")},
               "instance": inst.path, "dtype": inst.dtype, "shape": list(inst.shape),
               "weight_dtype": spec.weight_dtype, "input": {"kind": "captured", "sha256": inst.sha256}}
        try:
            out[inst.path] = CaseSpec.from_dict(raw)
        except SpecError:  # a norm given another dtype than the model's (float32 inside bfloat16): no case
            continue
    return out


@dataclass(frozen=True)
class ModelResult:
    """A model's run: the capture's plain data (what OUT/model.json holds), its instances' records, the report."""
    about: dict
    records: list
    problem: str | None  # the capture stopped (one line), nothing was run

    @property
    def table(self) -> str:
        from harness.reports.model_view import model_table

        return model_table(self.about, self.records)


def check_args(args) -> tuple[CaseSpec, int | None, list[str]]:
    """(the model's spec, its token count, the path names); UsageError (one line) for any bad argument."""
    spec, tokens = model_spec(args)
    path_names = paths_arg(args.paths)
    if args.max_memory is not None and not args.max_memory > 0:
        raise UsageError(f"--max-memory: must be > 0 GB, got {args.max_memory:g}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout: must be > 0, got {args.timeout}")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out: {args.out} exists and is not a folder")
    return spec, tokens, path_names


def run_model(args) -> ModelResult:
    """Capture the model in a worker, run its instances on the paths into OUT, write model.json and model.md."""
    from harness.engine.model_capture import ModelTarget
    from harness.engine.model_worker import capture_in_worker
    from harness.engine.run import run

    spec, tokens, path_names = check_args(args)
    outliers = outliers_of(args)
    store = os.path.join(args.out, captured.FOLDER)
    captured.use_store(store)
    budget = int(args.max_memory * 2**30) if args.max_memory is not None else None
    target = ModelTarget(spec.to_dict(), tokens, store, budget, outliers, tuple(path_names))
    if not args.quiet:
        print(f"normdiff: capturing {spec.cls} in {spec.dtype} in a worker …", file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)
    cap = capture_in_worker(target, args.timeout * (1 + len(path_names)), os.path.join(args.out, LOG))
    if cap.usage:
        raise UsageError(cap.problem)
    specs = instance_specs(spec, cap.instances)
    about = {"target": spec.cls, "init": spec.init_dict, "dtype": spec.dtype, "seed": spec.seed,
             "input": "tokens" if tokens is not None else spec.input_dict, "shape": list(spec.shape),
             "outliers": cap.planted or None, "problem": cap.problem, "ref_max_abs": cap.ref_max_abs,
             "paths": path_names, "instances": [{**asdict(i), "case_id": specs[i.path].case_id if i.path in specs
                                                 else None} for i in cap.instances],
             "whole": [asdict(w) for w in cap.whole]}
    if cap.problem is not None:  # nothing is run, nothing in OUT is touched (the captures made so far stay)
        return ModelResult(about, [], cap.problem)
    write_atomic(os.path.join(args.out, INSTANCES), "".join(s.to_json() + "\n" for s in specs.values()))
    if specs:
        run(list(specs.values()), path_names, args.out, jobs=args.jobs, timeout=args.timeout,
            progress=not args.quiet, max_memory=args.max_memory, cache=None)
    write_atomic(os.path.join(args.out, MODEL_FILE), json.dumps(about, indent=1) + "\n")
    wanted = {s.case_id for s in specs.values()}
    records = [r for r in latest_per_execution(read_results(os.path.join(args.out, "results.jsonl")))
               if r["case_id"] in wanted] if specs else []
    _reports(about, records, args.out)
    return ModelResult(about, records, None)


def _reports(about: dict, records: list, out_dir: str) -> None:
    """OUT/model.md (the table) and, from the records, the usual reports (summary.md, report.html, …)."""
    from harness.reports.model_view import model_table
    from harness.reports.write import write_reports

    write_atomic(os.path.join(out_dir, "model.md"), model_table(about, records))
    if records:
        write_reports(records, out_dir)


def cmd_model(args) -> int:
    result = run_model(args)
    if result.problem is not None:
        print(f"normdiff: error: {result.problem}", file=sys.stderr)
        return 1
    print(result.table, end="")
    return 1 if any(r["verdict"] != Verdict.PASS for r in result.records) else 0


def add_command(subparsers) -> None:
    p = subparsers.add_parser("model", help="every norm instance of a whole model, scored with the activations "
                                            "the model gives it (docs/models.md)")
    p.add_argument("target", metavar="TARGET", help="PKG.MOD:NAME, a class or factory of a whole model; or a "
                                                    "transformers architecture with --config")
    p.add_argument("--init", metavar="JSON", help="the constructor's (or factory's) keyword arguments")
    p.add_argument("--config", metavar="JSON", help="a transformers config's fields (random weights; the zoo extra)")
    p.add_argument("--dtype", default="float32", help="the model's dtype (default float32)")
    p.add_argument("--shape", nargs="+", metavar="N", help="the example input's shape (default 2 8 64)")
    p.add_argument("--input", metavar="JSON", help='the example input\'s kind, e.g. \'{"kind": "normal"}\'')
    p.add_argument("--tokens", type=int, metavar="N", help=f"token ids of length N (a language model; "
                                                           f"default {DEFAULT_TOKENS} with --config)")
    p.add_argument("--seed", type=int, default=0, help="the weights' and input's seed")
    p.add_argument("--paths", help="the paths (default: every built-in path)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"the output folder (default {DEFAULT_OUT})")
    p.add_argument("--max-memory", type=float, metavar="GB",
                   help="what the captured activations may take (and each worker's limit)")
    p.add_argument("--outliers", type=float, nargs="?", const=1e4, metavar="SCALE",
                   help="plant massive activations: SCALE x the median |activation| (default 1e4)")
    p.add_argument("--outlier-channels", nargs="+", metavar="C", help="their channels (default: two drawn)")
    p.add_argument("--outlier-tokens", nargs="+", metavar="T", help="their token positions (default 0)")
    p.add_argument("--jobs", type=int, default=None, help="workers for the instances (default: cores)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per execution")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_model)
