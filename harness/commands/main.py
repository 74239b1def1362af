"""The command line (docs/contracts.md §5): `normdiff COMMAND …`, same as `python -m harness …`.

Bad usage or a bad spec is one line on stderr and exit 2, checked before
anything is written. Data goes to files; messages go to stderr. Each command
lives in its own module under harness/commands/ with an `add_command`.
"""
from __future__ import annotations

import argparse
import sys
import warnings

from harness.commands import bugs, fuzz, gate, history, lift, model, paths, reduce, repro, run, zoo
from harness.commands.common import Parser
from harness.core.errors import UsageError

COMMANDS = (run, gate, fuzz, repro, reduce, bugs, paths, history, lift, zoo, model)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="normdiff", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    for module in COMMANDS:
        module.add_command(sub)
    return parser


# torch's pytree deprecating its own LeafSpec check, raised where a command unpickles a tree spec a worker sent
# (`bugs --check`'s first lines): a library's chatter, not a message of the command. Workers ignore all warnings.
warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated", category=FutureWarning)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
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
