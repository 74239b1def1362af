"""One entry of the known-bug catalog: an upstream report (or a new finding) and the executions that show it.

cases/bugs.py and cases/zoo_bugs.py list the entries; `normdiff bugs --check`
runs them.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.core.records import ALSO_STATIC, SYMBOLIC_ONLY
from harness.core.verdicts import Verdict
from harness.spec import CaseSpec

EXPECTS = ("reproduced", "fixed")


@dataclass(frozen=True)
class Bug:
    """One upstream report and the executions that show it."""

    id: str
    link: str | None          # the report; None for a finding not reported yet
    title: str
    specs: tuple[CaseSpec, ...]
    paths: tuple[str, ...]
    verdict: Verdict          # what every spec x path gets while the bug is present
    expect: str               # "reproduced" or "fixed" with the pinned versions
    note: str                 # status, cause, what the cases show
    controls: tuple[tuple[CaseSpec, str], ...] = ()   # (spec, path) that must pass
    # Of an entry of symbolic cases (docs/shapes.md): "symbolic only" (the same size compiled statically passes)
    # or "also static"; what each check's static control must say. None for static cases.
    scope: str | None = None

    @property
    def checks(self) -> list[tuple[CaseSpec, str]]:
        """Every (spec, path) that shows the bug."""
        return [(s, p) for s in self.specs for p in self.paths]

    @property
    def needs(self) -> tuple[str, ...]:
        """The packages its module cases import their classes from (transformers for the zoo's findings)."""
        specs = [*self.specs, *(s for s, _ in self.controls)]
        return tuple(sorted({s.cls.partition(".")[0].partition(":")[0] for s in specs if s.cls}))


def entry(id, link, title, specs, paths, verdict, expect, note, controls=(), scope=None) -> Bug:
    """A catalog entry from plain spec dicts; the note is folded to one paragraph. An entry of symbolic cases
    says its scope; one of static cases has none."""
    assert expect in EXPECTS, expect
    specs = tuple(CaseSpec.from_dict(s) for s in specs)
    assert scope in (None, SYMBOLIC_ONLY, ALSO_STATIC), (id, scope)
    assert (scope is not None) == any(s.dynamic for s in specs), f"{id}: a symbolic entry, and only one, has a scope"
    return Bug(
        id=id, link=link, title=title, specs=specs, paths=tuple(paths),
        verdict=verdict, expect=expect, note=" ".join(note.split()),
        controls=tuple((CaseSpec.from_dict(s), p) for s, p in controls), scope=scope,
    )
