"""Several fuzz searches at once, one store: what keeps every core busy during `normdiff fuzz`.

One search feeds its workers one example at a time (eager, then each path
under test), so while a path compiles the other cores wait. A campaign runs
`--searches N` searches as child processes of the same command, each with its
own seed (seed, seed+1, …) and output folder under DIR/searches/, sharing the
hypothesis database; then it merges what they found into DIR: one finding per
signature (a program finding that another one explains is dropped), the
failure spec files, and DIR/fuzz.json with the campaign's throughput.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

from harness.core.records import json_safe, write_atomic
from harness.search.programs import Skeleton
from harness.search.store import clear_failures, explained, failures_dir, is_program

# The fuzz options a child search takes over as they are (dest -> flag).
_PASSED = {"paths": "--paths", "minutes": "--minutes", "database": "--database", "patterns": "--patterns",
           "styles": "--styles", "dtypes": "--dtypes", "inputs": "--inputs", "max_row": "--max-row",
           "max_elements": "--max-elements", "max_shrinks": "--max-shrinks", "max_failures": "--max-failures",
           "timeout": "--timeout"}


def child_argv(args, index: int, seed: int, out: str, per_search_examples: int | None) -> list[str]:
    argv = [sys.executable, "-m", "harness", "fuzz", "--searches", "1", "--seed", str(seed + index),
            "--out", os.path.join(out, "searches", str(index))]
    for dest, flag in _PASSED.items():
        value = getattr(args, dest, None)
        if value is not None:
            argv += [flag, str(value)]
    if per_search_examples is not None:
        argv += ["--max-examples", str(per_search_examples)]
    if args.programs:
        argv.append("--programs")
    if args.quiet:
        argv.append("--quiet")
    return argv


def _simplicity(f: dict) -> tuple:
    sig = f["signature_tuple"]
    changes = len(Skeleton.from_key(sig[4]).changes()) if is_program(sig) and not sig[4].startswith("text-") else 0
    return (changes, len(json.dumps(f["case"])), f["signature"])


def merge(out: str, children: list[str]) -> dict:
    """DIR/fuzz.json and DIR/failures/ from the children's; returns the merged summary."""
    summaries = []
    for d in children:
        path = os.path.join(d, "fuzz.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                summaries.append(json.load(fh))
    found = []
    for s in summaries:
        for f in s["findings"]:
            if f.get("file"):
                f["signature_tuple"] = (f["path"], f["verdict"], f["pattern"], f["style"], f["dtype"])
                found.append(f)
    kept: list[dict] = []
    for f in sorted(found, key=_simplicity):  # the simplest of a bug first, so it explains the others
        sig = f["signature_tuple"]
        known = [k["signature_tuple"] for k in kept]
        if sig in known or explained(sig, known):
            continue
        target = os.path.join(failures_dir(out), os.path.basename(f["file"]))
        os.makedirs(failures_dir(out), exist_ok=True)
        shutil.copyfile(f["file"], target)
        f["file"] = target
        f["repro"] = f"normdiff repro {target} --path {f['path']}"
        kept.append(f)
    for f in kept:
        f.pop("signature_tuple")
    examples = sum(s["search_examples"] + s["shrink_examples"] + s["replay_examples"] for s in summaries)
    return {"searches": len(children), "search_examples": sum(s["search_examples"] for s in summaries),
            "shrink_examples": sum(s["shrink_examples"] for s in summaries),
            "replay_examples": sum(s["replay_examples"] for s in summaries),
            "executions": sum(s["executions"] for s in summaries), "examples": examples,
            "structures": sum(s.get("structures", 0) for s in summaries),
            "findings": kept, "per_search": [{k: s[k] for k in ("settings", "seconds", "examples_per_minute")}
                                            for s in summaries]}


def run_campaign(args, seed: int, budget_examples: int | None) -> int:
    """Run args.searches child searches and merge them; the exit code of `normdiff fuzz`."""
    n = args.searches
    clear_failures(args.out)
    shutil.rmtree(os.path.join(args.out, "searches"), ignore_errors=True)
    per = None if budget_examples is None else max(1, -(-budget_examples // n))
    start = time.monotonic()
    procs = [subprocess.Popen(child_argv(args, i, seed, args.out, per), stdout=subprocess.DEVNULL)
             for i in range(n)]
    print(f"normdiff fuzz: {n} searches (seeds {seed}..{seed + n - 1}), one database; "
          f"outputs in {os.path.join(args.out, 'searches')}", file=sys.stderr, flush=True)
    try:
        codes = [p.wait() for p in procs]
    except KeyboardInterrupt:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        codes = [130]
    minutes = (time.monotonic() - start) / 60.0
    merged = merge(args.out, [os.path.join(args.out, "searches", str(i)) for i in range(n)])
    merged["seconds"] = round(60.0 * minutes, 3)
    merged["examples_per_minute"] = round(merged["examples"] / minutes, 2) if minutes > 0 else 0.0
    merged["settings"] = {"seed": seed, "searches": n, "programs": bool(args.programs)}
    write_atomic(os.path.join(args.out, "fuzz.json"), json.dumps(json_safe(merged), indent=2) + "\n")
    err = sys.stderr
    print(f"normdiff fuzz: {merged['examples']} examples in {minutes:.2f} min over {n} searches: "
          f"{merged['examples_per_minute']:.1f} examples/min; {len(merged['findings'])} signatures", file=err)
    for f in merged["findings"]:
        print(f"  {f['path']} {f['verdict']} {f['pattern']} {f['style']} {f['dtype']}: {f['repro']}", file=err)
    if any(c not in (0, 1) for c in codes):
        print(f"normdiff fuzz: a search ended with exit codes {codes}", file=err)
        return 130 if 130 in codes else 2
    return 1 if merged["findings"] else 0
