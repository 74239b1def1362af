"""The one face every path shows: prepare a case once, run inputs many times.

A path module defines a subclass of `Path`; `prepare` does the expensive work
(export, compile, lowering) and returns a `Prepared` whose `run` is cheap.
Failures are raised as `StageError` (export | compile | run) or `Unsupported`,
so the runner can turn them into records without knowing the path.

A path also owns everything else about itself, so adding one is one module
and one registry line: what it runs (`description`), the distributions whose
versions its records carry (`packages`), what a warm worker imports for it
(`warm_imports`), and its part of the standalone repro script. Its
pipeline is written once: module-level functions (`pipeline`) that
`prepare`, `Prepared.run` and `intermediates` call, which the script pastes
by their source (`script_code`) beside a short `run_path` calling them
(`script_calls`), so a fix to the live path is a fix to its script. A path
whose graph can be read value by value also implements `intermediates` (a
runner that exposes them), and attribution asks it for them, never its
class. What the engine may do with a path is declared, never found by
inspecting its methods: `takes_shared_export`, `artifact_cacheable`,
`restore_takes_build`, `has_intermediates` (defaults: no, so a path written
before they existed runs as it always did, exporting itself and uncached).
This is the public plug-in face (docs/contracts.md §6): keep it stable (add, never
rename).
"""
from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


class Unsupported(Exception):
    """The path cannot take this case, for a documented reason."""


class IntermediatesUnavailable(Exception):
    """The intermediates of this execution cannot be read, for the reason given (attribution says so)."""


class StageError(Exception):
    """An exception raised inside one stage of a path."""

    def __init__(self, stage: str, message: str):
        super().__init__(f"{stage}: {message}")
        self.stage = stage
        self.message = message


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    line = text.splitlines()[0].strip()
    return f"{type(exc).__name__}: {line}"[:500]


STAGES = ("export", "compile", "run")


def example_args(example) -> tuple:
    """The positional arguments of the model: `example` is one tensor, or a tuple for several inputs."""
    return example if isinstance(example, tuple) else (example,)


def input_arrays(x) -> tuple:
    """The inputs of one run as a tuple: `x` is one array, or a tuple for several inputs (x, then y, r…)."""
    return x if isinstance(x, tuple) else (x,)


def dynamic_of(spec) -> tuple | None:
    """(the dims of x compiled symbolic, their maximum) of a `"dynamic"` case, or None for a static one: what the
    pipeline functions take as their `dynamic` argument (a path's own option, passed, never a constant)."""
    return (tuple(spec.dynamic), spec.dynamic_max) if spec.dynamic else None


def symbolic_shapes(example, dynamic, low):
    """torch.export's `dynamic_shapes` of `example` (the tuple of the model's input tensors): x's dims `dynamic[0]`
    as torch.export.Dim in [low, dynamic[1]]; an extra input of x's very shape shares them (a residual, a gate),
    one of its own shape stays static (its sizes are part of the case's structure)."""
    import torch

    named = {d: torch.export.Dim(f"d{d}", min=low, max=dynamic[1]) for d in dynamic[0]}
    return tuple(dict(named) if t.shape == example[0].shape else None for t in example)


def is_backward(model) -> bool:
    """Whether `model` is a gradient case's Backward module: it holds the norm as forward_module, then n_inputs."""
    return hasattr(model, "forward_module") and hasattr(model, "n_inputs")


def export_program(model, example, dynamic=None):
    """torch.export of `model` on `example` (the tuple of its input tensors), under no_grad.

    The runner's shared export is made this way, and so is a path's own when
    it has none, and the repro scripts paste it: one export for all. A
    gradient case's Backward is exported as torch's joint forward-backward
    graph (`joint_graph`): torch.export cannot trace the autograd.grad in its forward.
    `dynamic` (dynamic_of: dims of x and their maximum, or None) exports
    those dims symbolic (symbolic_export).
    """
    import torch

    if is_backward(model):
        model = joint_graph(model, example)
    if dynamic:
        return symbolic_export(model, example, dynamic)
    with torch.no_grad():
        return torch.export.export(model, example)


def symbolic_export(model, example, dynamic):
    """torch.export of `model` with x's dims `dynamic[0]` symbolic in [1, dynamic[1]] (symbolic_shapes), under
    no_grad and size-oblivious (a size-1 example is not specialised, so the program is the same whatever size
    it was traced at); where torch's own code guards a size away from 1 (instance_norm's "more than 1 spatial
    element") torch refuses 1, and the range starts at 2 (symbolic_range says which)."""
    import torch
    from torch.fx.experimental import _config as shape_config

    for d in dynamic[0]:  # traced at 2, not 1: a later re-trace (to_edge) would narrow the range to the hint's
        if example[0].shape[d] == 1:  # (export reads the example's shapes, dtypes and strides, not its values)
            example = tuple(torch.cat([t, t], d) if t.shape == example[0].shape else t for t in example)
    with torch.no_grad(), shape_config.patch(backed_size_oblivious=True):
        try:
            return torch.export.export(model, example, dynamic_shapes=symbolic_shapes(example, dynamic, 1))
        except torch._dynamo.exc.UserError as exc:  # a constraint violation: a guard excludes size 1
            if "Constraints violated" not in str(exc):
                raise
            return torch.export.export(model, example, dynamic_shapes=symbolic_shapes(example, dynamic, 2))


def symbolic_facts(spec, ep=None) -> dict:
    """The facts of a symbolic compile (none for a static case): `compiles`, 1 (the one compile serves every
    size; a path that specialises counts its own), and `symbolic_range`, the range torch.export gave the dims."""
    if not spec.dynamic:
        return {}
    found = symbolic_range(ep) if ep is not None else None
    return {"compiles": 1, "symbolic_range": found or [1, spec.dynamic_max]}


def symbolic_range(ep) -> list[int] | None:
    """[low, high] of an ExportedProgram's symbolic sizes (its range constraints), or None: it has none."""
    ranges = [(int(r.lower), int(r.upper)) for r in ep.range_constraints.values()]
    return [min(lo for lo, _ in ranges), max(hi for _, hi in ranges)] if ranges else None


def joint_graph(backward, example):
    """harness.oracle.backward.joint_graph, imported when a gradient case is exported (not with this module:
    the registry is read without torch). A repro script pastes the oracle's own definition under this name."""
    from harness.oracle import backward as oracle_backward

    return oracle_backward.joint_graph(backward, example)


def pasted(functions) -> str:
    """The source of each function, each once, in order: what a repro script pastes (one definition)."""
    return "\n\n".join(inspect.getsource(f) for f in dict.fromkeys(functions))


@contextlib.contextmanager
def stage(name: str, step: str | None = None):
    """Re-raise anything from the block as a StageError of stage `name`.

    `name` is one of the contracts' stages (docs/contracts.md §3) (export, compile, run); `step` names the
    finer step inside it (e.g. "import" for TVM's frontend), which prefixes
    the message.
    """
    assert name in STAGES, name
    try:
        yield
    except (Unsupported, StageError):
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes a record
        message = first_line(exc)
        raise StageError(name, f"{step}: {message}" if step else message) from exc


@dataclass
class Prepared:
    """A compiled case: `run(x)` maps an input array to the output array.

    `x` is a NumPy array in the case's dtype (bfloat16 as ml_dtypes.bfloat16),
    in logical (contiguous) order; the output is returned the same way. A case
    whose program reads extra inputs (docs/contracts.md §7) passes a tuple of arrays
    (x first, then the extra inputs in sorted order); `input_arrays` unpacks
    both forms.
    `facts` holds JSON-able facts about what the path did (delegated or not,
    which rewrite fired, …); they are copied into every record.
    `built` is the path's own handle on what it compiled (a TVM executable,
    an ExecuTorch program buffer), for its `artifact()`; None if it has none.
    """

    run_fn: Callable[[np.ndarray], np.ndarray]
    facts: dict[str, Any] = field(default_factory=dict)
    built: Any = None

    def run(self, x: np.ndarray) -> np.ndarray:
        with stage("run"):
            return self.run_fn(x)


@dataclass(frozen=True)
class Intermediate:
    """One value a path's graph computed: its name there, op, dtype, value (NumPy, logical order)."""
    name: str
    op: str
    dtype: str
    value: np.ndarray


@dataclass
class Capture:
    """One run of a path's graph with its intermediates exposed (what `Path.intermediates` runs return).

    `output` is the index of the intermediate the graph returns (the first, of several; None: not
    among them); `rerun_output` what the re-run returned, to check against
    the path's own output; `changes` lists what exposing the intermediates
    is known to have changed in what the compiler does (each makes the
    attribution approximate); `method` says how they were read.
    """
    intermediates: list[Intermediate]
    output: int | None
    rerun_output: np.ndarray | tuple | None  # a tuple of arrays for a model of several outputs
    method: str
    changes: list[str] = field(default_factory=list)

# Warm-ups of paths that compile through torch.export's decompositions (and torch.onnx.export): tables
# those frontends rebuild on every compile, kept while what they are built from is unchanged.
FRONTEND_MEMO = "harness.paths._frontend_memo:install_decompositions"
ONNX_REGISTRY_MEMO = "harness.paths._frontend_memo:install_onnx_registry"


class Path:
    """Base of every path. Subclasses set `name`, `description` and implement `prepare`."""

    name: str = ""
    # What it runs, in one line (the README's paths table, docs/paths.md and `normdiff paths`).
    description: str = ""
    control_path: str | None = None  # the path without this one's rewrite (a report's control), or None
    # The Python packages whose versions records carry (distribution names).
    packages: tuple[str, ...] = ("torch",)
    # Modules a warm worker imports before forking, so `prepare` does not pay for them; "module:function"
    # also calls a function of no arguments there (what a path's first prepare in a process pays beyond imports).
    warm_imports: tuple[str, ...] = ("torch", "torch.export")
    # Warm-ups ("module:function") that `restore` needs as well: run in warm workers even when the cache
    # holds every artifact of the path, which skips the compile warm-ups of warm_imports.
    restore_warm_ups: tuple[str, ...] = ()
    # The repro script's import lines for this path (torch, numpy, ml_dtypes come with every script).
    script_imports: str = ""
    # The module-level functions `prepare`, `Prepared.run` and `intermediates` call, with the helpers they
    # call, in the order a script defines them: the repro script pastes each by its source. Each uses only
    # what a script has (torch, numpy, ml_dtypes, `script_imports`, to_torch, to_numpy, single), and the
    # path's own options reach them as arguments, never as module constants.
    pipeline: tuple[Callable, ...] = ()

    # What the engine may do with the path, declared (an undeclared capability is not used):
    # `prepare` takes the keyword `exported` (the runner's one torch.export of the structure, see prepare).
    takes_shared_export: bool = False
    # `artifact` and `restore` are implemented: the persistent cache keeps what prepare built.
    artifact_cacheable: bool = False
    # `restore` takes the keyword `build` (the case's builder, see restore).
    restore_takes_build: bool = False
    # `intermediates` is implemented, and the script's `script_calls` define `intermediates(model, example,
    # x)` from the same pipeline: the repro script then carries the stage table (docs/attribution.md).
    has_intermediates: bool = False
    # How the path runs a gradient case (`"grad": true`, docs/contracts.md §1), in a few words for `normdiff
    # paths` and the records' facts ("torch autograd", "torch's joint graph as an inference graph", …), or None:
    # it cannot train, and such a case is `unsupported` with `cannot_train` as the reason, without a prepare.
    # A path that trains gets, in `prepare`, the case's backward module (forward(*inputs, *cotangents) -> the
    # gradients in order: each input's, then each floating parameter's) and, with `takes_shared_export`, its
    # export: torch's joint forward-backward graph. A path with a training flow of its own (autograd, a compiled
    # backward, TVM's relax.transform.Gradient) finds the norm's own module as `module.forward_module`.
    trains: str | None = None
    cannot_train: str = "the path has no backward"
    # How the path compiles a case's symbolic dims (`"dynamic"`, §1: torch.export Dim, TVM SizeVars, ONNX
    # dynamic axes, …), or None: it cannot, and such a case is `unsupported` with `cannot_symbolic` as the reason.
    # A symbolic path's `prepare` compiles the spec's `dynamic` dims as symbolic sizes in [1, spec.dynamic_max]
    # from an example at one size; its Prepared then runs inputs of every size of that structure. A path that
    # specialises (guards, recompiles) counts its compiles in the fact `compiles`.
    symbolic: str | None = None
    cannot_symbolic: str = "the path compiles static shapes only"

    def script_calls(self) -> str:
        """Python source of `run_path(model, example, x)` (the output as a NumPy array) calling the pipeline.

        `model` is the eval-mode module, `example` the tuple of its input
        tensors, `x` the same inputs as a tuple of NumPy arrays. With
        `has_intermediates`, also `intermediates(model, example, x)`: the
        (name, op, dtype, value) of every value computed, the index of the
        returned one among them or None, and the re-run's output. Short: the
        work is in the pipeline's functions, which the live path calls too.
        The default runs the model as eager does.
        """
        return (f'def run_path(model, example, x):\n    """{self.name}: {self.description}"""\n'
                "    with torch.no_grad():\n        return to_numpy(model(*example))\n")

    def script_code(self) -> str:
        """Python source defining `run_path(model, example, x)` (and `intermediates`, see script_calls).

        It runs in a standalone script that imports only torch, numpy,
        ml_dtypes and `script_imports`, with `to_torch`, `to_numpy` and
        `single` defined (see harness.repro.pieces). The default pastes the
        `pipeline` by its source and adds `script_calls`; a path written
        before `pipeline` existed may override this instead.
        """
        return "\n\n\n".join(part for part in (pasted(self.pipeline), self.script_calls()) if part)

    def structure_key(self, spec) -> str:
        """Cases with the same key share one prepared artifact (the engine groups and caches by it)."""
        return spec.structure_key()

    # Bump when what artifact() writes changes meaning: older cache entries then miss.
    artifact_version: int = 1
    # Facts that say where the path's own caches found its artifact (hit, miss): the only facts a warm run
    # may give otherwise than the cold run that filled the caches.
    cache_facts: tuple[str, ...] = ()

    def artifact(self, prepared: Prepared) -> bytes | None:
        """What `prepare` built, as bytes for the persistent cache; None: not cacheable.

        Optional (the default caches nothing). A path that overrides it also
        overrides `restore`, and declares `artifact_cacheable = True` (an
        undeclared one is not cached); `restore(spec, artifact(p))` must run
        exactly as `p` does; the facts are kept by the cache beside the bytes.
        """
        return None

    def restore(self, spec, data: bytes) -> Prepared:
        """A Prepared rebuilt from `artifact()`'s bytes, without exporting or compiling.

        Raise anything if the bytes cannot be used: the cache entry is then
        dropped and the case prepared afresh. A restore that also takes the
        keyword `build` (and declares `restore_takes_build = True`) is given the case's builder, `build() -> (module,
        example)` as prepare gets them, for an artifact that runs on the
        module's own parameters. Facts it returns replace the kept ones of the
        same name (its `cache_facts`: where the artifact came from).
        """
        raise NotImplementedError(f"path {self.name!r} keeps no artifacts")

    def intermediates(self, spec, module, example) -> Callable[[Any], Capture]:
        """The path's graph rebuilt with every value it computes exposed: run(x) -> Capture (attribution).

        Optional. Attribution calls it for a failing execution (inaccurate,
        dtype_mismatch, nonfinite) with what `prepare` is given: `spec`, the
        eval-mode `module` and its `example` (a tensor, or a tuple of them;
        `example_args` gives the model's arguments). It rebuilds what `prepare`
        builds, changed only so that the intermediates can be read, and
        returns `run(x)`, `x` as `Prepared.run` takes it. Each run gives a
        Capture: every value the graph computed (name, op, dtype, NumPy value),
        which of them the graph returns, and the re-run's output, checked bit
        for bit against the path's own (a difference makes the attribution
        approximate, as do the `changes` it lists). One build serves every
        case of the structure. The default raises IntermediatesUnavailable:
        the record then says the path runs as one call. A path implementing
        it declares `has_intermediates` once its script can read them too.
        """
        raise IntermediatesUnavailable(f"path {self.name!r} does not expose its intermediates (a compiled "
                                       "library or a delegated program runs as one call)")

    def prepare(self, spec, module, example) -> Prepared:
        """Build the artifact for `spec`.

        `module` is the eager torch module (parameters already set, in eval
        mode); `example` is a torch tensor of the case's input (dtype and
        memory format as the spec says), or a tuple of tensors when the case
        has extra inputs (`example_args` gives the model's arguments either
        way). Raise Unsupported or StageError.

        A path that starts from torch.export may take a keyword
        `exported=None` and declare `takes_shared_export = True`: the runner
        then exports each structure once per worker (`export_program`) and
        passes the ExportedProgram to every such path; it must not be
        mutated. Where that export fails, the path is called without it and
        exports itself (its own error, or its own fallbacks). A path that
        does not declare it is called as above, and exports itself.
        """
        raise NotImplementedError
