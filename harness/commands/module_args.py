"""A module case from the command line (`lift CLASS …`, `run --class CLASS …`): the flags that build its spec."""
from __future__ import annotations

import json

from harness.core.errors import UsageError
from harness.spec import CaseSpec, SpecError


def add_module_options(p, with_class: bool) -> None:
    """--init, --dtype, --shape, … (and --class for `run`)."""
    if with_class:
        p.add_argument("--class", dest="cls", metavar="PKG.MOD:CLASS",
                       help="run a module case (docs/contracts.md §8) built from the flags below, without a spec file")
    p.add_argument("--init", metavar="JSON", help="the constructor's keyword arguments, as a JSON object")
    p.add_argument("--dtype", default="float32", help="the input dtype (default float32)")
    p.add_argument("--weight-dtype", metavar="DTYPE", help="the module's dtype (default: --dtype)")
    p.add_argument("--shape", nargs="+", metavar="N", help="the input shape: 2 8 64 or 2,8,64 (default 2 8 64)")
    p.add_argument("--inputs", metavar="JSON",
                   help='the forward\'s other arguments by name, e.g. \'{"gate": {"kind": "normal"}}\'')
    p.add_argument("--input", metavar="JSON", help='the input kind of x, e.g. \'{"kind": "outlier"}\'')
    p.add_argument("--params", default=None, choices=("init", "ones", "normal"),
                   help="init: the constructor's values (default); ones/normal: every floating tensor redrawn")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--pattern", help="the norm family the class is written after (default: what its lift shows)")


def _json(flag: str, text: str | None):
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag}: not valid JSON ({exc.msg} at column {exc.colno})") from None


def _shape(values: list[str] | None) -> list[int]:
    if not values:
        return [2, 8, 64]
    try:
        return [int(v) for item in values for v in item.replace(",", " ").split()]
    except ValueError:
        raise UsageError(f"--shape: expected ints like 2 8 64, got {' '.join(values)!r}") from None


def module_spec(cls: str, args) -> CaseSpec:
    """The module spec the flags describe; UsageError (one line) when bad."""
    raw = {"class": cls, "dtype": args.dtype, "shape": _shape(args.shape)}
    for key, flag, value in (("init", "--init", args.init), ("inputs", "--inputs", args.inputs),
                             ("input", "--input", args.input)):
        parsed = _json(flag, value)
        if parsed is not None:
            raw[key] = parsed
    if args.weight_dtype:
        raw["weight_dtype"] = args.weight_dtype
    if args.params:
        raw["params"] = {"kind": args.params}
    if args.seed is not None:
        raw["seed"] = args.seed
    if args.pattern:
        raw["pattern"] = args.pattern
    try:
        return CaseSpec.from_dict(raw)
    except SpecError as exc:
        raise UsageError(str(exc)) from None
