"""The command line (docs/contracts.md §5): `normdiff COMMAND …`, same as `python -m harness …`.

Bad usage or a bad spec is one line on stderr and exit 2, checked before
anything is written. Data goes to files; messages go to stderr. Each command
lives in its own module under harness/commands/ with an `add_command`.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import warnings

from harness.commands.common import Parser
from harness.core.errors import UsageError

# each command's module under harness/commands/, in --help's order, and the commands it adds
COMMANDS = {"run": ("run", "cases", "merge"), "gate": ("gate",), "fuzz": ("fuzz",), "repro": ("repro",),
            "reduce": ("reduce",), "bugs": ("bugs",), "paths": ("paths",), "history": ("history",),
            "lift": ("lift",), "zoo": ("zoo",), "model": ("model",)}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: of every command, or of `command` alone (the one being run: a command's
    module is imported only when it is asked for, `normdiff run` without fuzz's hypothesis or the bugs
    catalog, about 1 s of every start on a loaded machine). An unknown or missing command gets them all, for
    argparse's list of choices."""
    parser = Parser(prog="normdiff", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    for module, commands in COMMANDS.items():
        if command is None or command in commands:
            importlib.import_module(f"harness.commands.{module}").add_command(sub)
    return parser


def _command_of(argv: list[str]) -> str | None:
    """The command `argv` names, if it names a known one first (the top level has no option but -h)."""
    known = {c for commands in COMMANDS.values() for c in commands}
    return argv[0] if argv and argv[0] in known else None


# torch's pytree deprecating its own LeafSpec check, raised where a command unpickles a tree spec a worker sent
# (`bugs --check`'s first lines): a library's chatter, not a message of the command. Workers ignore all warnings.
warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(_command_of(argv))
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            raise UsageError("a command is required: " + ", ".join(sorted(parser._subparsers._group_actions[0].choices)))
        return args.func(args)
    except UsageError as exc:
        print(f"normdiff: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
