"""A persistent, content-addressed cache of compiled artifacts, shared by runs.

Why: nearly all of a nightly's time is `prepare` (export, import, compile,
lowering) of structures that did not change since the night before. An entry
holds what a path's `artifact(prepared)` serialised (TVM's exported library,
ExecuTorch's program bytes, ONNX Runtime's optimized model) and the facts of
its records, under a key of everything the artifact depends on, so a new
library, harness or path version never reuses an old one.

Safe without locks: an entry is written to a temporary file in its folder and
renamed into place, so a reader sees a whole entry or none. Every entry
carries its key, size and sha256; one that does not match (torn, corrupt, of
another format, or restored with an error) is deleted and rebuilt, never
trusted. Two runs building the same key both write a whole, equal entry and
the last rename wins. A size bound evicts the least recently used entries
(a hit touches the entry's mtime); each process counts its own writes
between measurements of the folder, so concurrent writers can overshoot the
bound by what they wrote since they last measured it.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import inspect
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from enum import StrEnum

from harness.core.errors import UsageError
from harness.core.records import TMP_PREFIX, temporary_file

ENTRY_FORMAT = 1  # the layout of an entry file; a change makes every old entry a miss
MAGIC = b"normdiff-artifact\n"
DEFAULT_MAX_GB = 5.0
MAX_GB_ENV = "NORMDIFF_CACHE_MAX_GB"
RESCAN_WRITES = 16  # the folder is measured again after this many writes (others write too)
STALE_TMP_SECONDS = 3600.0  # a temporary file this old was left by a killed writer
# Harness modules every artifact depends on besides its path's own: how the
# module is built from the spec and how its parameters are drawn.
# The catalog styles are rendered from their programs, so the program modules that build a
# module (parse, walk, torch_module, styles) are sources of every artifact too.
SHARED_SOURCES = ("harness.oracle.modules", "harness.oracle.inputs", "harness.program.styles",
                  "harness.program.parse", "harness.program.walk", "harness.program.torch_module")


class Origin(StrEnum):
    """Where an execution's artifact came from: a record's `artifact_cache`.

    The cache's own statuses, not verdicts (UNSUPPORTED: the path keeps no artifacts).
    """

    HIT = "hit"                  # restored from disk
    MISS = "miss"                # built (and stored if the path could serialise it)
    OFF = "off"                  # no cache
    UNSUPPORTED = "unsupported"  # the path keeps no artifacts, or could not serialise this one


def default_dir() -> str:
    """$XDG_CACHE_HOME/normdiff, else ~/.cache/normdiff."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "normdiff")


def max_bytes_from_env() -> int:
    """The size bound: NORMDIFF_CACHE_MAX_GB (default 5), in bytes."""
    raw = os.environ.get(MAX_GB_ENV, "").strip()
    if not raw:
        return int(DEFAULT_MAX_GB * 2**30)
    try:
        gb = float(raw)
    except ValueError:
        gb = -1.0
    if not gb > 0:
        raise UsageError(f"{MAX_GB_ENV}: must be a number of gigabytes > 0, got {raw!r}")
    return int(gb * 2**30)


def _normdiff_version() -> str:
    try:
        return importlib.metadata.version("normdiff")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _module_digest(names) -> str:
    """sha256 of the source files of modules `names` (an edit to a path invalidates its entries)."""
    digest = hashlib.sha256()
    for name in sorted(set(names)):
        module = sys.modules.get(name)
        try:
            source = inspect.getsourcefile(module) if module else None
            with open(source, "rb") as fh:
                digest.update(name.encode() + b"\0" + fh.read() + b"\0")
        except (OSError, TypeError):
            digest.update(name.encode() + b"\0?\0")
    return digest.hexdigest()


def _code_modules(path) -> list[str]:
    """The path class's modules (its MRO) and the harness modules they take functions from."""
    mods = [c.__module__ for c in type(path).__mro__ if c.__module__ not in ("builtins", "abc")]
    for name in list(mods):
        module = sys.modules.get(name)
        for obj in vars(module).values() if module else ():
            owner = getattr(obj, "__module__", None)
            if isinstance(owner, str) and owner.startswith("harness.") and callable(obj):
                mods.append(owner)
    for name in SHARED_SOURCES:
        __import__(name)
    return mods + list(SHARED_SOURCES)


def _digest(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


_HARNESS: list[str] = []


def harness_digest() -> str:
    """sha256 of every source file of the harness package (read once per process): the key part of what the
    harness computes beyond a path's artifact, which may depend on any of it."""
    if not _HARNESS:
        import harness

        root = os.path.dirname(os.path.abspath(harness.__file__))
        digest = hashlib.sha256()
        for folder, _, files in sorted(os.walk(root)):
            for name in sorted(f for f in files if f.endswith(".py")):
                full = os.path.join(folder, name)
                with open(full, "rb") as fh:
                    digest.update(os.path.relpath(full, root).encode() + b"\0" + fh.read() + b"\0")
        _HARNESS.append(digest.hexdigest())
    return _HARNESS[0]


def _cpu_digest() -> str:
    """The CPU's model and feature flags: an optimized ONNX model may hold kernels chosen for them."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            lines = [ln for ln in fh if ln.startswith(("model name", "flags"))][:2]
    except OSError:
        lines = [platform.processor()]
    return hashlib.sha256("".join(lines).encode()).hexdigest()[:16]


@dataclass
class CacheEntry:
    data: bytes
    facts: dict


@dataclass
class Stats:
    hits: int = 0
    misses: int = 0
    written: int = 0
    rejected: int = 0  # corrupt, partial, foreign or unrestorable entries deleted
    evicted: int = 0


@dataclass
class ArtifactCache:
    """Entries under `root`/v<ENTRY_FORMAT>/<2 hex>/<key>, at most `max_bytes` in all."""

    root: str
    max_bytes: int = int(DEFAULT_MAX_GB * 2**30)
    stats: Stats = field(default_factory=Stats)

    def __post_init__(self):
        self.root = os.path.abspath(self.root)
        self._parts: dict[str, dict] = {}
        self._usage: int | None = None  # bytes in the cache, as far as this process knows

    # -- what a worker needs to open the same cache ----------------------------
    def config(self) -> dict:
        return {"root": self.root, "max_bytes": self.max_bytes}

    @classmethod
    def from_config(cls, cfg: dict | None) -> "ArtifactCache | None":
        return cls(cfg["root"], cfg["max_bytes"]) if cfg else None

    # -- keys --------------------------------------------------------------------
    def key_parts(self, path) -> dict:
        """Everything but the structure an entry of `path` depends on."""
        if path.name not in self._parts:
            from harness.paths import installed_version

            self._parts[path.name] = {
                "path": path.name,
                "artifact_version": getattr(path, "artifact_version", 1),
                "packages": {d: installed_version(d) for d in sorted(path.packages)},
                "normdiff": _normdiff_version(),
                "code": _module_digest(_code_modules(path)),
                "python": "%d.%d" % sys.version_info[:2],
                "machine": platform.machine(),
                "cpu": _cpu_digest(),
            }
        return self._parts[path.name]

    def key(self, path, spec, salt: str = "", kind: str = "") -> str:
        """The entry of `path` for `spec`'s structure; `salt` is what else the artifact depends on (a module
        case's code and values: its class is the user's, edited between runs); `kind` names an entry that
        is not the artifact itself (harness.engine.stored: the failure to build it)."""
        parts = {**self.key_parts(path), "structure": path.structure_key(spec)}
        if salt:
            parts["module"] = salt
        if kind:
            parts["kind"] = kind
        return _digest(parts)

    def derived_key(self, kind: str, **parts) -> str:
        """The entry of something the harness computed (an attribution, a lifted module): under `kind`, the
        whole harness's source (harness_digest) and the interpreter and machine, besides `parts`."""
        return _digest({"kind": kind, "harness": harness_digest(), "normdiff": _normdiff_version(),
                        "python": "%d.%d" % sys.version_info[:2], "machine": platform.machine(), **parts})

    def file_of(self, key: str) -> str:
        return os.path.join(self.root, f"v{ENTRY_FORMAT}", key[:2], key)

    # -- reading -----------------------------------------------------------------
    def get(self, key: str) -> CacheEntry | None:
        """The entry for `key`, or None (missing; a bad one is deleted on the way)."""
        target = self.file_of(key)
        try:
            with open(target, "rb") as fh:
                raw = fh.read()
        except OSError:
            self.stats.misses += 1
            return None
        entry = _parse(raw, key)
        if entry is None:
            self.discard(key)
            self.stats.misses += 1
            return None
        with contextlib.suppress(OSError):
            os.utime(target)  # least recently used goes first
        self.stats.hits += 1
        return entry

    def discard(self, key: str) -> None:
        """Delete the entry of `key` (it could not be trusted or restored)."""
        with contextlib.suppress(OSError):
            size = os.path.getsize(self.file_of(key))
            os.remove(self.file_of(key))
            self.stats.rejected += 1
            if self._usage is not None:
                self._usage -= size

    # -- writing -----------------------------------------------------------------
    def put(self, key: str, path_name: str, data: bytes, facts: dict) -> bool:
        """Store an entry (atomically); False if the folder cannot be written."""
        header = {"format": ENTRY_FORMAT, "key": key, "path": path_name, "size": len(data),
                  "sha256": hashlib.sha256(data).hexdigest(), "facts": facts, "created": time.time()}
        blob = MAGIC + json.dumps(header).encode() + b"\n" + bytes(data)
        target = self.file_of(key)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            fd, tmp = temporary_file(os.path.dirname(target))  # 0666 less the umask, as open()
        except OSError:
            return False
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
            os.replace(tmp, target)
        except (OSError, TypeError, ValueError):
            with contextlib.suppress(OSError):
                os.remove(tmp)
            return False
        self.stats.written += 1
        if self._usage is None or self.stats.written % RESCAN_WRITES == 0:
            self._usage = self.usage()  # other processes write too
        else:
            self._usage += len(blob)
        if self._usage > self.max_bytes:
            self.evict()
        return True

    # -- size bound --------------------------------------------------------------
    def _files(self) -> list[tuple[float, int, str]]:
        """(mtime, size, file) of every entry; leftovers of killed writers are removed."""
        out = []
        base = os.path.join(self.root, f"v{ENTRY_FORMAT}")
        now = time.time()
        with contextlib.suppress(OSError):
            for sub in os.scandir(base):
                if not sub.is_dir():
                    continue
                with contextlib.suppress(OSError):
                    for f in os.scandir(sub.path):
                        with contextlib.suppress(OSError):
                            st = f.stat()
                            if f.name.startswith(TMP_PREFIX):
                                if now - st.st_mtime > STALE_TMP_SECONDS:
                                    os.remove(f.path)
                                continue
                            out.append((st.st_mtime, st.st_size, f.path))
        return out

    def usage(self) -> int:
        """Bytes the entries take on disk now."""
        return sum(size for _, size, _ in self._files())

    def evict(self, target: int | None = None) -> int:
        """Delete least recently used entries until at most `target` bytes (default 90% of the bound)."""
        target = int(self.max_bytes * 0.9) if target is None else target
        files = sorted(self._files())
        total = sum(size for _, size, _ in files)
        removed = 0
        for _, size, name in files:
            if total <= target:
                break
            with contextlib.suppress(OSError):
                os.remove(name)
                removed += 1
            total -= size
        self.stats.evicted += removed
        self._usage = total
        return removed


def _parse(raw: bytes, key: str) -> CacheEntry | None:
    """The entry in `raw` if it is whole and is the one for `key`, else None."""
    if not raw.startswith(MAGIC):
        return None
    end = raw.find(b"\n", len(MAGIC))
    if end < 0:
        return None
    try:
        header = json.loads(raw[len(MAGIC):end])
    except ValueError:
        return None
    if not isinstance(header, dict):
        return None
    data = raw[end + 1:]
    if (header.get("format") != ENTRY_FORMAT or header.get("key") != key or header.get("size") != len(data)
            or header.get("sha256") != hashlib.sha256(data).hexdigest()):
        return None
    facts = header.get("facts")
    return CacheEntry(data, facts if isinstance(facts, dict) else {})


def library_cache_env(cache: ArtifactCache | None) -> dict[str, str]:
    """Environment for the libraries' own caches: Inductor's under ours, or off with --no-cache."""
    if cache is None:
        return {"TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
    return {"TORCHINDUCTOR_CACHE_DIR": os.path.join(cache.root, "inductor")}


def use_library_caches(cache: ArtifactCache | None) -> None:
    """Point Inductor's own caches (its FX graph and AOTAutograd caches, its kernels) under ours, or turn
    them off with --no-cache, in this process and the ones it starts.

    Set, not defaulted: importing torch._inductor (the forkserver's warm imports do) sets
    TORCHINDUCTOR_CACHE_DIR to torch's default in /tmp, shared by every user of the machine, and
    torch reads its "force disable" flag from the environment when its config is imported, so the
    flag itself is set too.
    """
    os.environ.update(library_cache_env(cache))
    if cache is None and "torch" in sys.modules:
        import torch.compiler.config

        torch.compiler.config.force_disable_caches = True


def use_library_caches_of(config: dict | None) -> ArtifactCache | None:
    """use_library_caches for the cache a worker's plain-data config names (ArtifactCache.config()), before
    its warm-ups (Inductor's probe of the CPU compiles into that folder); the cache, or None."""
    cache = ArtifactCache.from_config(config)
    use_library_caches(cache)
    return cache


@contextlib.contextmanager
def library_caches(cache: ArtifactCache | None):
    """use_library_caches for an in-process run: the environment and torch's flag as they were after it."""
    names = ("TORCHINDUCTOR_CACHE_DIR", "TORCHINDUCTOR_FORCE_DISABLE_CACHES")
    env = {name: os.environ.get(name) for name in names}
    config = sys.modules.get("torch.compiler.config")
    flag = config.force_disable_caches if config is not None else None
    use_library_caches(cache)
    try:
        yield
    finally:
        for name, value in env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if config is not None:
            config.force_disable_caches = flag
