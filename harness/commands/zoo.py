"""`normdiff zoo list`: every norm implementation of a model library, with its status, and the blocks set aside.

The listing is read from the library's sources (harness/zoo: nothing is imported in this process); each
implementation's spec is then built, exported and lifted on the runner's workers in every dtype
(harness/engine/zoo_builds.py), and its line says how far it got and, if not all the way, the first reason.
`--source-only` lists from the sources alone. Without transformers installed (and no `--root`), it says
how to install the extra and exits 2.
"""
from __future__ import annotations

import json
import sys

from harness.commands.common import Parser
from harness.core.errors import UsageError

INSTALL = "the zoo needs transformers: pip install 'normdiff[zoo]'"


def _load(args):
    from harness.zoo.catalog import load_zoo
    from harness.zoo.corpus import DEFAULT_PACKAGE, CorpusError, package_dir

    if args.root is None and (args.package or DEFAULT_PACKAGE) == DEFAULT_PACKAGE:
        try:
            package_dir(DEFAULT_PACKAGE)
        except CorpusError:
            raise UsageError(INSTALL) from None
    try:
        return load_zoo(root=args.root, package=args.package, pattern=args.glob)
    except CorpusError as exc:
        raise UsageError(str(exc)) from None


def _dtypes(text: str) -> tuple[str, ...]:
    from harness.zoo.catalog import DTYPES

    names = tuple(d.strip() for d in text.split(",") if d.strip())
    bad = [d for d in names if d not in DTYPES]
    if bad or not names:
        raise UsageError(f"--dtypes: expected some of {', '.join(DTYPES)}, got {text!r}")
    return names


def row_status(results: dict, dtypes) -> tuple[str, str]:
    """(lifted | partial | exported | built | failed | no spec, the first shortfall as `dtype stage: reason`)."""
    from harness.engine.zoo_builds import STATUSES

    statuses = [results[d]["status"] for d in dtypes]
    bad = [(d, results[d]) for d in dtypes if results[d]["status"] != "lifted"]
    reason = f"{bad[0][0]} {bad[0][1].get('stage', '')}: {bad[0][1].get('reason', '')}" if bad else ""
    if not bad:
        return "lifted", ""
    if "no spec" in statuses:
        return "no spec", bad[0][1].get("reason", "")
    if "lifted" in statuses:
        return "partial", reason
    return min(statuses, key=STATUSES.index), reason


def _describe(entry) -> str:
    b = entry.base
    if b is None:
        return entry.reason
    bits = [b.get("pattern", "(family from the lift)"), f"shape {b['shape']}"]
    if "config" in b["init"]:
        bits.append("config " + b["init"]["config"]["class"].rpartition(":")[2])
    if b.get("inputs"):
        bits.append("inputs " + ",".join(b["inputs"]))
    return ", ".join(bits)


def _print(zoo, rows, dtypes, out) -> None:
    name_w = max([len(e.name) for e in zoo.entries] + [14])
    out.write(f"{'implementation':<{name_w}}  classes  {'status':<8}  reason or spec\n")
    by_key = {r["key"]: r for r in rows or []}
    for e in zoo.entries:
        if rows is None:
            status, detail = ("spec" if e.base else "no spec"), _describe(e)
        else:
            status, detail = row_status(by_key[e.key]["results"], dtypes)
            detail = detail or _describe(e)
        out.write(f"{e.name:<{name_w}}  {len(e.members):>7}  {status:<8}  {detail}\n")
    from harness.zoo.classify import RULES

    out.write(f"\nset aside, not norms ({len(zoo.set_aside)}), by rule:\n")
    for rule, text in RULES.items():
        names = [s for s in zoo.set_aside if s.rule == rule]
        if names:
            out.write(f"  {rule}: {text} ({len(names)})\n")
            for s in names:
                out.write(f"    {s.target.rpartition(':')[2]}" + (f"  ({s.detail})" if s.detail else "") + "\n")
    out.write("\n" + totals(zoo, rows, dtypes) + "\n")


def totals(zoo, rows, dtypes) -> str:
    from collections import Counter

    rules = Counter(s.rule for s in zoo.set_aside)
    with_spec = sum(1 for e in zoo.entries if e.base)
    line = (f"{zoo.library} {zoo.version or ''}".strip() + f": {zoo.considered} classes looked at, {zoo.norms} norm classes"
            f" in {len(zoo.entries)} implementations ({with_spec} with a spec), {len(zoo.set_aside)} set aside ("
            + ", ".join(f"{n} {r}" for r, n in sorted(rules.items())) + ")")
    if rows is not None:
        per = []
        for d in dtypes:
            lifted = sum(1 for r in rows if r["results"][d]["status"] == "lifted")
            per.append(f"{d} {lifted}/{len(rows)}")
        line += "; built, exported and lifted: " + ", ".join(per)
    return line


def cmd_list(args) -> int:
    if args.jobs < 1 or not args.timeout > 0:
        raise UsageError(f"--jobs must be at least 1 and --timeout positive, got {args.jobs} and {args.timeout:g}")
    dtypes = _dtypes(args.dtypes)
    zoo = _load(args)
    only = set(n.strip() for n in args.only.split(",")) if args.only else None
    if only:
        unknown = only - {e.name for e in zoo.entries}
        if unknown:
            raise UsageError(f"--only: no implementation named {', '.join(sorted(unknown))}")
    rows = None
    if not args.source_only:
        from harness.engine.zoo_builds import resolve_zoo

        def progress(rec):
            print(f"zoo: {rec['class'].rpartition(':')[2]} {rec['dtype']}: {rec['status']}"
                  + (f" ({rec['stage']}: {rec['reason']})" if rec.get("reason") else ""), file=sys.stderr)

        rows = resolve_zoo(zoo, dtypes=dtypes, jobs=args.jobs, timeout=args.timeout, names=only,
                           on_record=None if args.quiet else progress)
    if only:
        from dataclasses import replace

        zoo = replace(zoo, entries=tuple(e for e in zoo.entries if e.name in only))
    _print(zoo, rows, dtypes, sys.stdout)
    if args.json:
        write_json(args.json, zoo, rows, dtypes)
    return 0


def write_json(path: str, zoo, rows, dtypes) -> None:
    from harness.engine.zoo_builds import outside
    from harness.engine.zoo_builds import summary

    data = {"zoo": zoo.to_dict(), "dtypes": list(dtypes)}
    if rows is not None:
        for r in rows:
            ops = sorted({o for d in dtypes for o in r["results"][d].get("ops", [])})
            r["ops"], r["outside"] = ops, outside(ops)
        data["builds"], data["summary"] = rows, summary(rows, dtypes)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")


def add_command(subparsers) -> None:
    from harness.zoo.catalog import BUILD_TIMEOUT

    p = subparsers.add_parser("zoo", help="every norm implementation of a model library (transformers by default)")
    sub = p.add_subparsers(dest="zoo_command", required=True, parser_class=Parser)
    ls = sub.add_parser("list", help="one line per implementation, the blocks set aside, the totals")
    where = ls.add_mutually_exclusive_group()
    where.add_argument("--root", help="a folder of modeling files instead of an installed package")
    where.add_argument("--package", help="an installed package whose models/ (or own folder) holds the files "
                                         "(default: transformers)")
    ls.add_argument("--glob", default="modeling_*.py", help="the file names to read (default: modeling_*.py)")
    ls.add_argument("--source-only", action="store_true",
                    help="list from the sources alone: do not build, export and lift each implementation")
    ls.add_argument("--dtypes", default="float32,float16,bfloat16", help="the dtypes each is built in")
    ls.add_argument("--only", help="comma-separated implementation names (representatives) to list")
    ls.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ls.add_argument("--timeout", type=float, default=BUILD_TIMEOUT,
                    help=f"seconds per implementation and dtype (default {BUILD_TIMEOUT:g})")
    ls.add_argument("--json", help="also write the listing (and each build's record, ops) to this JSON file")
    ls.add_argument("--quiet", action="store_true", help="no progress on stderr")
    ls.set_defaults(func=cmd_list)
