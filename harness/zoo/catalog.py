"""The zoo of one library: its norm implementations with their members and specs, its blocks set aside.

Everything is read from source (corpus -> classify -> group -> synth), deterministic for a given set
of files, and cached in-process keyed by the files' names, sizes and modification times. The suite
takes `zoo_specs()`; `normdiff zoo list` prints `load_zoo()`.
"""
from __future__ import annotations

import importlib.metadata
import os
from dataclasses import asdict, dataclass

from harness.spec import input_of
from harness.zoo import corpus as corpus_mod
from harness.zoo.classify import RULES, discover
from harness.zoo.group import group
from harness.zoo.synth import SynthError, specs_of, synthesize

DTYPES = ("float32", "float16", "bfloat16")
BUILD_TIMEOUT = 180.0  # seconds to build, export and lift one implementation in one dtype (`zoo list --timeout`)
# The catalog's outlier input (harness.spec.input_of): LLM activations, a few values 100x the rest;
# it stresses a norm's reduction (the variance is dominated by the outliers) on every layout.
ADVERSARIAL = input_of("outlier")


def default_inputs(dtype: str) -> list[dict]:
    """The input objects each implementation runs in `dtype`: a normal draw and one adversarial kind."""
    return [{"kind": "normal"}, dict(ADVERSARIAL)]


@dataclass(frozen=True)
class Entry:
    """One implementation: its representative, every class that shares it, and its spec or why not."""

    key: str
    representative: str  # "package.module:ClassName"
    members: tuple[str, ...]  # every class sharing it, representative first
    base: dict | None  # the spec without dtype and input (None: cannot be synthesized)
    reason: str  # why there is no spec ("" when there is one)
    notes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.representative.rpartition(":")[2]

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SetAside:
    target: str
    rule: str  # a key of classify.RULES
    detail: str


@dataclass(frozen=True)
class Zoo:
    library: str
    version: str | None  # the installed distribution's version (None for a folder)
    root: str
    sys_path: str  # the import root of the classes' dotted names
    considered: int  # classes looked at (a "Norm" in the name, or deriving from a norm)
    norms: int  # norm classes (members of some entry)
    entries: tuple[Entry, ...]
    set_aside: tuple[SetAside, ...]

    def entry_for(self, target: str) -> Entry | None:
        return next((e for e in self.entries if target in e.members), None)

    def specs(self, dtypes=DTYPES, inputs_for=default_inputs) -> list[dict]:
        """Every entry's module specs (entries without a spec have none): dtype × input, in entry order."""
        out = []
        for e in self.entries:
            if e.base is not None:
                out += specs_of(e.base, dtypes, inputs_for)
        return out

    def to_dict(self) -> dict:
        return {"library": self.library, "version": self.version, "root": self.root, "sys_path": self.sys_path,
                "considered": self.considered, "norms": self.norms,
                "entries": [e.to_dict() for e in self.entries],
                "set_aside": [asdict(s) for s in self.set_aside], "rules": dict(RULES)}


def _version(package: str | None) -> str | None:
    if package is None:
        return None
    try:
        return importlib.metadata.version(package.partition(".")[0])
    except importlib.metadata.PackageNotFoundError:
        return None


def build(corpus: corpus_mod.Corpus, version: str | None = None) -> Zoo:
    found = discover(corpus)
    entries = []
    for impl in group(found.norms):
        members = tuple(m.target for m in impl.members)
        try:
            synth = synthesize(impl.representative)
            entries.append(Entry(impl.key, impl.representative.target, members, synth.base, "", tuple(synth.notes)))
        except SynthError as exc:
            entries.append(Entry(impl.key, impl.representative.target, members, None, str(exc)))
    aside = tuple(SetAside(v.ref.target, v.rule, v.detail) for v in found.set_aside)
    return Zoo(corpus.library, version, corpus.root, corpus.sys_path, len(found.norms) + len(aside),
               len(found.norms), tuple(entries), aside)


def _fingerprint(root: str, pattern: str) -> tuple:
    out = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".py") and (f.startswith(("modeling_", "configuration_", corpus_mod.MODULAR_PREFIX))
                                      or pattern != corpus_mod.DEFAULT_GLOB):
                st = os.stat(os.path.join(folder, f))
                out.append((folder, f, st.st_size, st.st_mtime_ns))
    return tuple(out)


_CACHE: dict[tuple, Zoo] = {}


def load_zoo(root: str | None = None, package: str | None = None,
             pattern: str = corpus_mod.DEFAULT_GLOB) -> Zoo:
    """The zoo of a folder or installed package (default: transformers), cached in-process.

    Raises corpus.CorpusError (one line) when the folder or package cannot be read."""
    if root is None:
        package = package or corpus_mod.DEFAULT_PACKAGE
        base = corpus_mod.package_dir(package)
        where = os.path.join(base, "models") if os.path.isdir(os.path.join(base, "models")) else base
    else:
        where = os.path.abspath(root)
        if not os.path.isdir(where):
            raise corpus_mod.CorpusError(f"--root: no such folder: {root}")
    key = (where, package, pattern, _fingerprint(where, pattern))
    if key not in _CACHE:
        corpus = corpus_mod.load(root=where if root is not None else None, package=package, pattern=pattern)
        _CACHE[key] = build(corpus, _version(package) if root is None else None)
    return _CACHE[key]


def installed(package: str = corpus_mod.DEFAULT_PACKAGE) -> bool:
    """Whether the package is installed (found, not imported): the zoo suite exists only then."""
    try:
        corpus_mod.package_dir(package)
        return True
    except corpus_mod.CorpusError:
        return False


def zoo_specs(dtypes=DTYPES, inputs_for=default_inputs, root: str | None = None,
              package: str | None = None) -> list[dict]:
    """The zoo's module specs as plain dicts, for the `zoo` suite (cases/suites.py): every implementation
    with a spec, in every dtype, with each input object `inputs_for(dtype)` gives (default: a normal draw
    and the catalog's outlier). Raises corpus.CorpusError when the library is not installed."""
    return load_zoo(root=root, package=package).specs(dtypes, inputs_for)


def members_index(classes=None) -> dict[str, tuple[str, ...]]:
    """{class: every class of the installed transformers sharing its implementation}, for each zoo class ({}:
    no transformers). Read from the sources once per call (load_zoo walks the library's folders to see
    whether they changed): a report asks once for all its classes. `classes`, if given, are those asked
    about: when none lives in the package, {} at once, the same answer for them (a class outside the zoo
    stands for itself) without reading the library's sources (2-4 s a report of a user's classes)."""
    if classes is not None and not any(_package_of(c) == corpus_mod.DEFAULT_PACKAGE for c in classes):
        return {}
    if not installed():
        return {}
    try:
        zoo = load_zoo()
    except corpus_mod.CorpusError:
        return {}
    index: dict[str, tuple[str, ...]] = {}
    for e in zoo.entries:
        for cls in (e.representative, *e.members):
            index.setdefault(cls, e.members)
    return index


def _package_of(target: str) -> str:
    """The top-level package of a class target `module.path:Class`."""
    return target.partition(":")[0].partition(".")[0]
