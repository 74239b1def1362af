"""Tables torch's frontends rebuild on every compile, kept in a worker while what they are built from is unchanged.

A worker compiles hundreds of structures, and each compile of the TVM,
ExecuTorch and ONNX paths pays twice for tables that depend only on which
operators are registered (docs/measurements.md has the figures):

* `ExportedProgram.run_decompositions` (TVM's importer, `to_edge`, XNNPACK's
  lowering, the ONNX exporter: about eight calls per structure) collects the
  CompositeImplicitAutograd ops twice a call, and each collection re-walks
  the C++ dispatcher's CIA registrations once per op namespace to make sure
  `torch.ops` has an attribute for each (`_materialize_cpp_cia_ops`, over
  every namespace a worker has). Those attributes, once made, stay; walking again
  when the registrations are the same list as last time makes nothing new.
  torch does not cache this because a custom op can be registered at any
  time, so the memo keys on the registrations themselves: a new op changes
  the list and the walk runs again. Reading the registrations (a list of
  thousands of names from C++) costs more than the rest of that check, so a
  collection reads them once for all its namespaces (nothing registers an
  op while it walks them), not once per namespace.
* `run_decompositions` also lends each preserved CIA op (about 560) a
  Python kernel for some 20 dispatch keys, each through `op.py_impl(key)`,
  and restores them after: 12,000 calls a decomposition, each defining the
  same decorator afresh (and evaluating its `Callable[...]` annotations,
  most of the call's cost). The decorator `py_impl(key)` returns depends
  only on the op and the key, so the first one made for them is kept and
  handed out again: it registers exactly what a fresh one would.
* `torch.onnx.export` builds its `ONNXRegistry` from torchlib on every call
  (`ONNXRegistry.from_torchlib`: an ONNX signature inferred per
  function). The registry is a pure function of the opset version and of
  the installed torchlib; each call gets its own copy of the first one built
  for that opset (its own dict and lists, so `register_op` on one registry
  changes no other), holding the same, never-mutated function entries.
* Every node an FX interpreter pass makes (each of `run_decompositions`'s
  retraces, each ExecuTorch and XNNPACK pass) records where it came from:
  `NodeSource(node)` deep-copies the old node's whole `from_node` history
  into the new one, so a history is copied again at every pass, a tree that
  grows by a level each time (≈ 7 % of an `executorch-xnnpack` compile). A
  NodeSource is never changed once made (torch, ExecuTorch and torchao only
  read its fields; its cached `to_dict` is made from them), so inside
  `shared_provenance()` a deep copy of one hands out the object itself: each
  history is the same tree, equal node for node, made without copying the
  parts it shares with the one before. Only the ExecuTorch paths' compiles
  run inside it (their .pte and saved edge programs are the same bytes).

Each gives each compile exactly what it would have built itself (tests/paths/
test_frontend_memo.py compares the collected ops, the decomposed programs, the
registries, the exported ONNX bytes, the ExecuTorch paths' builds and the
histories with the memo on and off). NORMDIFF_FRONTEND_MEMO=0 leaves torch as it is. Paths that compile through these frontends name
the memo they use among their warm-ups (Path.warm_imports), so the
forkserver installs it once for every worker it forks.
"""
from __future__ import annotations

import contextlib
import os
import threading

ENV = "NORMDIFF_FRONTEND_MEMO"

_lock = threading.Lock()
_originals: dict[str, object] = {}


def enabled() -> bool:
    """Whether the memo may be installed (NORMDIFF_FRONTEND_MEMO is not "0")."""
    return os.environ.get(ENV, "1") != "0"


def installed() -> bool:
    return bool(_originals)


def install() -> None:
    """Install both memos in this process (idempotent; nothing when disabled or torch lacks the functions)."""
    install_decompositions()
    install_onnx_registry()


def install_decompositions() -> None:
    """The CIA walk's memo and the kept py_impl decorators: for paths that run torch.export's decompositions
    (TVM's importer, ExecuTorch)."""
    _once("cia", _install_cia)
    _once("py_impl", _install_py_impl)


def install_onnx_registry() -> None:
    """The ONNX registry's memo (imports torch.onnx's exporter: only for the paths that export to ONNX)."""
    _once("onnx", _install_onnx_registry)


@contextlib.contextmanager
def shared_provenance():
    """Within it, a deep copy of a torch.fx NodeSource (a node's provenance, never changed once made) is the object
    itself (nothing when disabled, torch has no NodeSource, or it has its own __deepcopy__ already)."""
    try:
        from torch.fx.traceback import NodeSource
    except ImportError:
        NodeSource = None
    if not enabled() or NodeSource is None or "__deepcopy__" in vars(NodeSource):
        yield
        return
    NodeSource.__deepcopy__ = _itself
    try:
        yield
    finally:
        del NodeSource.__deepcopy__


def _itself(self, memo):
    return self


def _once(name: str, installer) -> None:
    if not enabled():
        return
    with _lock:
        if name not in _originals:
            installer()


def uninstall() -> None:
    """Give torch back its own functions (tests compare the two)."""
    with _lock:
        if "cia" in _originals:
            from torch._export import utils

            original, collect = _originals["cia"]
            utils._materialize_cpp_cia_ops = original
            if collect is not None:
                for module in _collect_importers():
                    module._collect_all_valid_cia_ops = collect
        if "py_impl" in _originals:
            from torch._ops import OperatorBase

            OperatorBase.py_impl = _originals["py_impl"]
        if "onnx" in _originals:
            from torch.onnx._internal.exporter import _registration

            _registration.ONNXRegistry.from_torchlib = _originals["onnx"]
        _originals.clear()


def _install_cia() -> None:
    import torch
    from torch._export import utils

    original = getattr(utils, "_materialize_cpp_cia_ops", None)
    if original is None:
        return
    collect = getattr(utils, "_collect_all_valid_cia_ops", None)
    walked: list = [None]  # the registrations of the last complete walk
    reading: list = [None]  # the registrations, read once while a collection walks its namespaces

    def registrations() -> list:
        if reading[0] is not None:
            return reading[0]
        return torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")

    def materialize_cpp_cia_ops() -> None:
        seen = registrations()
        if seen == walked[0]:
            return
        original()
        walked[0] = seen

    def collect_all_valid_cia_ops():
        if reading[0] is not None:  # a collection inside a collection: the outer one reads
            return collect()
        reading[0] = registrations()
        try:
            return collect()
        finally:
            reading[0] = None

    utils._materialize_cpp_cia_ops = materialize_cpp_cia_ops
    if collect is not None:
        for module in _collect_importers():
            module._collect_all_valid_cia_ops = collect_all_valid_cia_ops
    _originals["cia"] = (original, collect)


def _collect_importers() -> list:
    """The modules that call torch's `_collect_all_valid_cia_ops` by a name of their own (imported from
    torch._export.utils), with that module itself: where the collection is replaced."""
    import importlib

    modules = []
    for name in ("torch._export.utils", "torch.export.exported_program", "torch.export.decomp_utils"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "_collect_all_valid_cia_ops"):
            modules.append(module)
    return modules


def _install_py_impl() -> None:
    import functools

    from torch._ops import OperatorBase

    original = OperatorBase.__dict__.get("py_impl")
    if original is None:
        return
    made: dict = {}  # (id(op), key) -> (op, its decorator); the op is held so its id is not reused

    @functools.wraps(original)
    def py_impl(self, k):
        try:
            return made[(id(self), k)][1]
        except (KeyError, TypeError):  # TypeError: a key that does not hash is not kept
            pass
        decorator = original(self, k)
        try:
            made[(id(self), k)] = (self, decorator)
        except TypeError:
            pass
        return decorator

    OperatorBase.py_impl = py_impl
    _originals["py_impl"] = original


def _install_onnx_registry() -> None:
    try:
        from torch.onnx._internal.exporter import _registration
    except ImportError:
        return
    registry_cls = _registration.ONNXRegistry
    original = registry_cls.__dict__.get("from_torchlib")
    if not isinstance(original, classmethod):
        return
    built: dict = {}

    def from_torchlib(cls, opset_version=_registration._constants.TORCHLIB_OPSET):
        key = (cls, opset_version)
        if key not in built:
            built[key] = original.__func__(cls, opset_version)
        first = built[key]
        copy = cls()
        copy._opset_version = first._opset_version
        copy.functions = {target: list(entries) for target, entries in first.functions.items()}
        return copy

    registry_cls.from_torchlib = classmethod(from_torchlib)
    _originals["onnx"] = original
