"""A catalog entry's two scripts, as `normdiff repro BUG-ID` and `repro BUG-ID --report` write them.

`normdiff bugs --check` runs both for every entry: the full script (every
input checked byte for byte, the stage table) and the short one a report
pastes; each must exit as the entry is recorded (1 while the bug shows, 0 once
it is fixed), since both paste normdiff's own check (harness.repro.check_code).
The case is the entry's first spec on its first path; a module case's full
script imports its class (from the LIFT record a worker wrote), its short
script is its lifted program's, as the report's is.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from cases.bug import Bug
from harness.core.records import write_atomic
from harness.spec import CaseSpec

EXITS = {"reproduced": 1, "fixed": 0}  # a script's exit code while the entry is as recorded


@dataclass(frozen=True)
class EntryScripts:
    """Where an entry's scripts were written, and the exit code both must give."""

    id: str
    full: str
    short: str
    expected: int


def case(bug: Bug) -> tuple[CaseSpec, str]:
    """The (spec, path) an entry's scripts reproduce: its first spec on its first path (`repro BUG-ID`'s)."""
    return bug.specs[0], bug.paths[0]


def write_scripts(bug: Bug, folder: str, lift_record: dict | None = None) -> EntryScripts:
    """Write FOLDER/ID-full.py and FOLDER/ID-short.py (hyphens: names no import can mean); a module case needs
    its LIFT record."""
    from harness.repro.script import render
    from harness.repro.short_script import render_short

    spec, path = case(bug)
    if spec.is_module:
        from harness.modules.lifted_spec import program_spec
        from harness.repro.module_script import render_module

        full = render_module(spec, path, lift_record, bug=bug)
        short = render_short(CaseSpec.from_dict(program_spec(spec, lift_record)[0]), path, bug.title)
    else:
        full, short = render(spec, path, bug=bug), render_short(spec, path, bug.title)
    names = [os.path.abspath(os.path.join(folder, f"{bug.id}-{kind}.py")) for kind in ("full", "short")]
    for name, text in zip(names, (full, short)):
        write_atomic(name, text, mode=0o777)
    return EntryScripts(bug.id, *names, EXITS[bug.expect])
