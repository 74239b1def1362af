"""`normdiff paths`: every registered path, what it runs, how it trains, its packages and their installed versions."""
from __future__ import annotations

import sys

from harness import paths


def describe() -> list[dict]:
    """One entry per registered path: name, description, how it trains (`trains`, or None and `cannot_train`),
    packages with versions (None: not installed)."""
    out = []
    for name in paths.names():
        try:
            path = paths.get(name)
        except Exception as exc:  # noqa: BLE001 - a broken plug-in is listed, not fatal
            out.append({"name": name, "description": f"cannot load: {exc}", "trains": None, "cannot_train": "",
                        "packages": {}})
            continue
        out.append({"name": name, "description": path.description, "trains": path.trains,
                    "cannot_train": path.cannot_train,
                    "packages": {d: paths.installed_version(d) for d in path.packages}})
    return out


def cmd_paths(args) -> int:
    rows = describe()
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        versions = ", ".join(f"{d} {v or '(not installed)'}" for d, v in r["packages"].items())
        trains = r["trains"] if r["trains"] is not None else f"cannot train: {r['cannot_train']}"
        pad = " " * width
        sys.stdout.write(f"{r['name'].ljust(width)}  {r['description']}\n{pad}  trains: {trains}\n"
                         f"{pad}  packages: {versions}\n")
    return 0


def add_command(subparsers) -> None:
    p = subparsers.add_parser("paths",
                              help="every registered path: what it runs, how it trains, its packages and versions")
    p.set_defaults(func=cmd_paths)
