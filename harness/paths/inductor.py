"""The `inductor` and `inductor-emulate` paths: torch.compile(module) on CPU.

    torch._dynamo.reset(); torch.compile(module, dynamic=False)   (the default backend, Inductor)
      -> the first call, on the case's example, traces and compiles  (stage "compile")
      -> later calls, with recompiling forbidden                     (stage "run")

Choices, written down:

* `inductor-emulate` sets torch._inductor.config.emulate_precision_casts only
  around its compile (config.patch). Without it Inductor elides the
  downcast-upcast pairs between fused low-precision ops, which its config
  documents as "typically closer to fp64 ref numerics"; with it those
  roundings are kept, as eager has them. Neither is wrong by itself: the
  scorer blames a path only where it is worse than eager.
* Fresh per prepare. Dynamo keeps compiled code on the forward's code object,
  shared by every instance of a module class, and its guards look neither at
  the Inductor config nor at which torch.compile call made the entry: without
  a reset, `inductor-emulate` would silently reuse `inductor`'s kernels for
  the same structure, and after
  the recompile limit a new structure would silently run eager. So each
  prepare resets Dynamo and compiles one OptimizedModule with dynamic=False
  (no automatic dynamic shapes). One artifact is live at a time: a prepared
  case run after another prepare reset Dynamo is compiled again, with its own
  config, before it runs. Runs use set_stance("fail_on_recompile"), so a
  guard miss is an error, never a silent recompile with another config.
* Inductor's on-disk caches (AOTAutograd's, the FX graph cache, the C++
  kernel cache) are left as users get them, in normdiff's cache folder
  (`<cache>/inductor`; off with --no-cache): their keys hold the graph and the
  Inductor config (emulate_precision_casts included; only tracing/threading
  knobs are left out), and parameters are graph inputs, not constants. Both
  hit across processes (checked: a second process compiling the same
  structures hits both, and its compile skips AOTAutograd's tracing and the
  C++ compiler; Dynamo still traces). `facts` says whether each hit
  (`inductor_aot_autograd_cache`, `inductor_fx_graph_cache`: hit, miss or
  off), so prepare_seconds can be read; they are the path's `cache_facts`,
  which differ between a cold and a warm run by design.
* Precompiled where the forward is one graph. With normdiff's cache on, the
  compile is Dynamo's AOT precompile of the same call
  (torch.compile(module, dynamic=False, fullgraph=True)._aot_compile): the
  same Dynamo capture, the same Inductor with the same config, its result a
  function that can be saved. `artifact` saves it (guards, Dynamo's bytecode,
  Inductor's bundled output) and `restore` loads it onto a freshly built
  module, so a warm run skips Dynamo's tracing as well as Inductor, which
  costs far more than the load even when Inductor's caches hit. It is called
  without Dynamo in between; its guards are checked on every call. A gradient
  case precompiles its forward_module on leaves that require grad, with grad
  on: AOTAutograd's forward and backward both compiled and bundled
  (force_non_lazy_backward_lowering), as the first call of the plain compile
  compiles them; the Backward differentiates it as before. A symbolic case
  precompiles on its marked_dynamic example as symbolic_compiled does (low 1,
  else 2); a size its guards exclude runs the plain compile of the case,
  which recompiles it, and is counted, as before. A forward with a graph
  break, forward hooks, or the caches off (--no-cache: precompiling needs
  them) takes the plain torch.compile above, as the repro script does, and is
  not kept. Checked: both give the same bits on the nightly and zoo suites,
  and on gradient and symbolic cases (tests/paths/test_inductor.py). The
  cache fact `inductor_precompiled` says which: hit (restored), miss
  (precompiled now), off (traced).
* The worker's one thread (torch.set_num_threads(1)) is what the generated
  C++ kernels are compiled for.
"""
from __future__ import annotations

import threading

from harness.core.tensors import to_numpy, to_torch
from harness.paths.base import (Path, Prepared, dynamic_of, example_args, input_arrays, is_backward, joint_graph,
                                stage)

# Dynamo holds one compiled artifact at a time (see above): the generation of the
# last reset, and a lock so a compile and a run are not interleaved across threads.
_LIVE = {"generation": 0}
_LOCK = threading.RLock()
# How a precompiled function says its guards refuse the inputs (torch._dynamo.aot_compile).
GUARD_MISS = "GuardManager check failed"


# -- the pipeline: what prepare and run call, and the repro scripts paste (one definition) ----------------------

def precision_config(emulate: bool):
    """The Inductor config a compile runs under: emulate_precision_casts=True if `emulate`, else unchanged."""
    import contextlib

    import torch._inductor.config

    return torch._inductor.config.patch(emulate_precision_casts=True) if emulate else contextlib.nullcontext()


def marked_dynamic(example, dynamic, low: int = 1):
    """Copies of `example`'s tensors with x's dims `dynamic[0]` (export_program's symbolic dims) marked dynamic
    in [low, max] (torch._dynamo.mark_dynamic), as are those of an extra input of x's very shape."""
    import torch

    dims, top = dynamic
    out = tuple(t.clone() for t in example)
    for t in out:
        if t.shape == out[0].shape:
            for d in dims:
                torch._dynamo.mark_dynamic(t, d, min=low, max=top)
    return out


def inductor_compiled(model, example, emulate: bool, dynamic=None):
    """torch.compile(model, dynamic=False), Dynamo reset first, compiled by a first call on `example` (the
    tuple of its input tensors) under precision_config(emulate). A Backward (a gradient case) is rebuilt around
    torch.compile of its forward_module: its call differentiates the compiled forward, as training does. With
    `dynamic` (the symbolic dims), symbolic_compiled makes that first call."""
    import torch

    torch._dynamo.reset()  # a fresh compile: nothing reused from another torch.compile
    if is_backward(model):  # a gradient case: autograd through the compiled forward (AOTAutograd's compiled backward)
        compiled = type(model)(torch.compile(model.forward_module, dynamic=False), model.n_inputs)
    else:
        compiled = torch.compile(model, dynamic=False)
    if dynamic:
        return symbolic_compiled(compiled, example, emulate, dynamic)
    with precision_config(emulate), torch.no_grad():
        compiled(*example)  # a Backward's call runs the forward and the backward: both compiled here
    return compiled


def symbolic_compiled(compiled, example, emulate: bool, dynamic):
    """`compiled` compiled by a first call on `example` marked_dynamic in [1, max], size-oblivious as
    export_program exports (an example of size 1 is not specialised, one graph serves 1 too); where torch's own
    code guards the size away from 1 (a constraint violation), compiled afresh in [2, max]."""
    import torch
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    for low in (1, 2):
        try:
            with precision_config(emulate), torch.no_grad(), \
                    torch.fx.experimental._config.patch(backed_size_oblivious=True):
                compiled(*marked_dynamic(example, dynamic, low))
            return compiled
        except ConstraintViolationError:
            if low == 2:
                raise
            torch._dynamo.reset()


def inductor_output(compiled, example, recompile: bool = False):
    """The compiled module's output on `example` as NumPy, recompiling forbidden (a guard miss is an error)
    unless `recompile` (a symbolic compile: a size its guards exclude is compiled again, and counted)."""
    import torch

    with torch.no_grad(), torch.compiler.set_stance("default" if recompile else "fail_on_recompile"):
        return to_numpy(compiled(*example))


def _reset() -> None:
    """torch._dynamo.reset(), and a new generation: what a plain compile made before is gone from Dynamo,
    and its run compiles it again (a precompiled function does not live in Dynamo: a reset leaves it)."""
    import torch

    torch._dynamo.reset()
    _LIVE["generation"] += 1


def _counters() -> dict:
    from torch._dynamo.utils import counters

    return {
        "graphs": counters["stats"]["unique_graphs"],
        "breaks": sum(counters["graph_break"].values()),
        "fx_hit": counters["inductor"]["fxgraph_cache_hit"],
        "fx_miss": counters["inductor"]["fxgraph_cache_miss"],
        "fx_bypass": counters["inductor"]["fxgraph_cache_bypass"],
        "aot_hit": counters["aot_autograd"]["autograd_cache_hit"],
        "aot_miss": counters["aot_autograd"]["autograd_cache_miss"],
    }


def _cache_status(before: dict, after: dict, kind: str) -> str:
    """"hit" or "miss" if the compile looked `kind`'s cache up, else "off"."""
    if after[f"{kind}_hit"] > before[f"{kind}_hit"]:
        return "hit"
    return "miss" if after[f"{kind}_miss"] > before[f"{kind}_miss"] else "off"


def warm_up_loader() -> None:
    """What loading a precompiled function first pays in a process (`restore`): the CPU's
    vector ISA, probed by compiling and loading test programs, and the loader's imports. Kept by torch in
    the process (functools caches), so forked workers start with it."""
    from torch._inductor import cpu_vec_isa

    cpu_vec_isa.pick_vec_isa()
    import torch._dynamo.aot_compile  # noqa: F401
    import torch._dynamo.package  # noqa: F401


def warm_up() -> None:
    """What Inductor's first compile in a process pays besides its imports, paid once by the warm process
    workers fork from: the loader's warm-up (above); the hash of torch's own
    sources its cache keys hold; the C++ builder's imports."""
    import torch.utils.cpp_extension  # noqa: F401 - the builder's setuptools and distutils imports
    from torch._inductor.codecache import torch_key

    warm_up_loader()
    torch_key()


def _has_hooks(module) -> bool:
    """Whether calling `module` runs anything its forward does not (hooks): then only the plain compile,
    which traces module.__call__, compiles what the module's call does; a precompile traces forward."""
    import torch

    if torch.nn.modules.module._has_any_global_hook():
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in module.modules())


class InductorPath(Path):
    """torch.compile(module) with Inductor on CPU."""

    name = "inductor"
    description = "torch.compile(module, dynamic=False) with the default (Inductor) backend on CPU"
    packages = ("torch",)
    warm_imports = ("torch", "torch.export", "torch._dynamo", "torch._inductor.compile_fx",
                    "harness.paths.inductor:warm_up")
    restore_warm_ups = ("harness.paths.inductor:warm_up_loader",)
    emulate = False
    cache_facts = ("inductor_fx_graph_cache", "inductor_aot_autograd_cache", "inductor_precompiled")
    # The script takes the plain compile (a precompile is the same Dynamo capture and Inductor, saved).
    pipeline = (is_backward, precision_config, marked_dynamic, inductor_compiled, symbolic_compiled,
                inductor_output)
    trains = "torch.compile of the norm, autograd through it (AOTAutograd's compiled backward)"
    artifact_cacheable = True
    restore_takes_build = True
    symbolic = ("torch._dynamo.mark_dynamic on the dims, then torch.compile: one compile unless a size breaks its "
                "guards (counted in `compiles`)")

    def script_calls(self) -> str:
        return f'''\
def run_path(model, example, x):
    """{self.name}: {self.description}"""
    return inductor_output(inductor_compiled(model, example, {self.emulate!r}, DYNAMIC), example, bool(DYNAMIC))
'''

    def _compile(self, module, args, dynamic=None) -> tuple:
        """A freshly compiled OptimizedModule (compiled on `args`, `dynamic` its symbolic dims) and its generation
        (inductor_compiled resets Dynamo: a new generation)."""
        compiled = inductor_compiled(module, args, self.emulate, dynamic)
        _LIVE["generation"] += 1
        return compiled, _LIVE["generation"]

    def _precompile(self, module, args, dynamic=None):
        """An OptimizedModule whose forward is Dynamo's AOT precompile of `module` (a Backward's forward_module,
        on leaves that require grad, with grad on) on `args` (`dynamic`: marked as symbolic_compiled marks
        them), or None where that does not apply (the caches off, hooks, a graph break, any failure: the plain
        compile then gives the path's own outcome)."""
        import torch

        if torch.compiler.config.force_disable_caches or _has_hooks(module) or (dynamic and is_backward(module)):
            return None
        if is_backward(module):  # the training flow: AOTAutograd compiles the forward and the backward now
            target, grad = module.forward_module, True
            args = tuple(a.detach().requires_grad_(True) for a in args[:module.n_inputs])
        else:
            target, grad = module, False
        _reset()
        for low in ((1, 2) if dynamic else (None,)):
            try:
                return _aot_compiled(target, marked_dynamic(args, dynamic, low) if dynamic else args, self.emulate,
                                     grad, bool(dynamic))
            except Exception as exc:  # noqa: BLE001 - a graph break, or a failure the plain compile reports itself
                from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

                if not (low == 1 and isinstance(exc, ConstraintViolationError)):
                    return None
                torch._dynamo.reset()  # torch's code guards the size away from 1: [2, max], as symbolic_compiled
        return None

    def prepare(self, spec, module, example) -> Prepared:
        args = example_args(example)
        dynamic = dynamic_of(spec)
        with _LOCK, stage("compile"):
            before = _counters()
            precompiled = self._precompile(module, args, dynamic)
            if precompiled is None:
                compiled, generation = self._compile(module, args, dynamic)
            after = _counters()
        facts = {
            # a gradient case: Inductor compiles AOTAutograd's forward and backward graphs (2 for one Dynamo graph)
            **({"inductor_backward": "compiled (AOTAutograd)", "inductor_compiled_graphs": _inductor_graphs(
                before, after)} if is_backward(module) else {}),
            "inductor_emulate_precision_casts": self.emulate,
            "inductor_graphs": after["graphs"] - before["graphs"],
            "inductor_graph_breaks": after["breaks"] - before["breaks"],
            "inductor_fx_graph_cache": _cache_status(before, after, "fx"),
            "inductor_aot_autograd_cache": _cache_status(before, after, "aot"),
            "inductor_precompiled": "off" if precompiled is None else "miss",
        }
        if is_backward(module):
            facts.update(_backward_facts(module, args))
        if dynamic:  # the compile that serves (a first try refused by a guard not counted); runs add their own
            facts["compiles"] = 1
        if precompiled is not None:
            return self._precompiled(spec, precompiled, module, args, facts)
        prepared = Prepared(None, facts)
        prepared.run_fn = self._plain_runner(prepared, module, args, dynamic, spec.layout,
                                             {"compiled": compiled, "generation": generation})
        return prepared

    def _plain_runner(self, prepared, module, args, dynamic, layout, state):
        """run(x) of the plain compile `state` holds, compiled again (not counted) where another prepare reset
        Dynamo since (or not compiled yet: generation -1); a symbolic case's recompiles are added to
        prepared.facts["compiles"] (the facts the engine holds, read after the runs)."""

        def run_fn(x):
            inputs = tuple(to_torch(a, layout) for a in input_arrays(x))
            with _LOCK:
                if state["generation"] != _LIVE["generation"]:
                    # another prepare reset Dynamo since: compile this case again, as it was (not counted)
                    state["compiled"], state["generation"] = self._compile(module, args, dynamic)
                start = _counters()["graphs"]
                out = inductor_output(state["compiled"], inputs, recompile=bool(dynamic))
                if dynamic:  # a size outside the compile's guards was compiled again: the facts, read after runs
                    prepared.facts["compiles"] += _counters()["graphs"] - start
                return out

        return run_fn

    def _precompiled(self, spec, compiled, module, args, facts) -> Prepared:
        """The Prepared of a precompiled OptimizedModule `compiled` (built: what `artifact` saves): a gradient
        case's Backward around it; a symbolic case's guard miss runs the plain compile (see the docstring)."""
        model = type(module)(compiled, module.n_inputs) if is_backward(module) else compiled
        prepared = Prepared(None, facts, compiled)
        plain = (self._plain_runner(prepared, module, args, dynamic_of(spec), spec.layout,
                                    {"compiled": None, "generation": -1}) if spec.dynamic else None)
        prepared.run_fn = _precompiled_runner(model, spec.layout, plain)
        return prepared

    def artifact(self, prepared: Prepared) -> bytes | None:
        """The precompiled function (None: traced by the plain compile, not kept)."""
        import torch._dynamo.config as dynamo_config

        if prepared.built is None:
            return None
        with dynamo_config.patch(enable_aot_compile=True):
            return prepared.built._save_aot_compiled_module()

    def restore(self, spec, data: bytes, build=None) -> Prepared:
        """The precompiled function `artifact` saved, loaded onto a module `build` makes (its parameters are
        the function's inputs; a gradient case's, onto its forward_module): neither Dynamo nor Inductor runs."""
        import torch
        import torch._dynamo.config as dynamo_config

        module, example = build()
        with _LOCK, dynamo_config.patch(enable_aot_compile=True):
            compiled = torch.compile(module.forward_module if is_backward(module) else module, dynamic=False,
                                     fullgraph=True)
            compiled._load_aot_compiled_module(data)
        facts = {"inductor_fx_graph_cache": "off", "inductor_aot_autograd_cache": "off", "inductor_precompiled": "hit"}
        if spec.dynamic:  # the restored function is the one compile (as kept); a guard miss's runs add theirs
            facts["compiles"] = 1
        return self._precompiled(spec, compiled, module, example_args(example), facts)


def _aot_compiled(module, args, emulate: bool, grad: bool, dynamic: bool):
    """torch.compile(module, dynamic=False, fullgraph=True) precompiled by Dynamo's AOT compile on `args`
    under precision_config(emulate), with grad on if `grad` (a training flow), size-oblivious if `dynamic`."""
    import contextlib

    import torch
    import torch._dynamo.config as dynamo_config
    from torch._dynamo.aot_compile import ModelInput

    oblivious = (torch.fx.experimental._config.patch(backed_size_oblivious=True) if dynamic
                 else contextlib.nullcontext())
    with dynamo_config.patch(enable_aot_compile=True), precision_config(emulate), \
            torch.set_grad_enabled(grad), oblivious:
        compiled = torch.compile(module, dynamic=False, fullgraph=True)
        compiled._aot_compile([ModelInput(args, {}, [])])
    return compiled


def _inductor_graphs(before: dict, after: dict) -> int:
    """How many graphs Inductor compiled between two _counters() of a compile: its FX graph cache's lookups,
    or, where it compiled without them (a precompile bypasses that cache; --no-cache), its compile_fx_inner
    calls (Dynamo's timings, cleared by the compile's own reset of Dynamo)."""
    from torch._dynamo.utils import compilation_time_metrics

    looked_up = sum(after[k] - before[k] for k in ("fx_hit", "fx_miss", "fx_bypass"))
    return max(looked_up, len(compilation_time_metrics.get("compile_fx_inner", ())))


def _backward_facts(backward, args) -> dict:
    """torch's joint graph's backward ops, and those Inductor's decomposition table leaves whole (`backward_kept`:
    lowered or run as an ATen fallback; the others decomposed before Inductor's kernels)."""
    from torch._inductor.decomposition import select_decomp_table

    from harness.paths._backward import backward_ops, joint_facts

    graph = joint_graph(backward, args)
    decomposed = {str(op) for op in select_decomp_table()}
    return joint_facts(graph, [op for op in backward_ops(graph.graph) if op not in decomposed])


def _precompiled_runner(model, layout, plain=None):
    """run(x) of a precompiled module (or a Backward around one): its guards checked on each call, no Dynamo.
    A guard miss raises, or, for a symbolic case, runs `plain` (the plain compile's run_fn), as it would."""

    def run_fn(x):
        import torch

        inputs = tuple(to_torch(a, layout) for a in input_arrays(x))
        with _LOCK, torch.no_grad():
            try:
                return to_numpy(model(*inputs))
            except RuntimeError as exc:
                if plain is None or not str(exc).startswith(GUARD_MISS):
                    raise
        return plain(x)

    return run_fn


class InductorEmulatePath(InductorPath):
    """As `inductor`, with emulate_precision_casts=True around the compile."""

    name = "inductor-emulate"
    control_path = "inductor"
    description = ("torch.compile(module, dynamic=False) with Inductor on CPU and "
                   "torch._inductor.config.emulate_precision_casts=True (eager's roundings kept)")
    emulate = True
