"""`normdiff paths`: every registered path, what it runs, its packages and their installed versions."""
from __future__ import annotations

import sys

from harness import paths


def describe() -> list[dict]:
    """One entry per registered path: name, description, packages with versions (None: not installed)."""
    out = []
    for name in paths.names():
        try:
            path = paths.get(name)
        except Exception as exc:  # noqa: BLE001 - a broken plug-in is listed, not fatal
            out.append({"name": name, "description": f"cannot load: {exc}", "packages": {}})
            continue
        out.append({"name": name, "description": path.description,
                    "packages": {d: paths.installed_version(d) for d in path.packages}})
    return out


def cmd_paths(args) -> int:
    rows = describe()
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        versions = ", ".join(f"{d} {v or '(not installed)'}" for d, v in r["packages"].items())
        sys.stdout.write(f"{r['name'].ljust(width)}  {r['description']}\n{' ' * width}  packages: {versions}\n")
    return 0


def add_command(subparsers) -> None:
    p = subparsers.add_parser("paths", help="every registered path: what it runs, its packages and versions")
    p.set_defaults(func=cmd_paths)
