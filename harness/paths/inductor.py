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
  the same structure (checked: same forward, second compile 1 ms), and after
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
* The worker's one thread (torch.set_num_threads(1)) is what the generated
  C++ kernels are compiled for.
"""
from __future__ import annotations

import contextlib
import threading

from harness.core.tensors import to_numpy, to_torch
from harness.paths.base import Path, Prepared, example_args, input_arrays, stage

# Dynamo holds one compiled artifact at a time (see above): the generation of the
# last reset, and a lock so a compile and a run are not interleaved across threads.
_LIVE = {"generation": 0}
_LOCK = threading.RLock()


def _counters() -> dict:
    from torch._dynamo.utils import counters

    return {
        "graphs": counters["stats"]["unique_graphs"],
        "breaks": sum(counters["graph_break"].values()),
        "fx_hit": counters["inductor"]["fxgraph_cache_hit"],
        "fx_miss": counters["inductor"]["fxgraph_cache_miss"],
        "aot_hit": counters["aot_autograd"]["autograd_cache_hit"],
        "aot_miss": counters["aot_autograd"]["autograd_cache_miss"],
    }


def _cache_status(before: dict, after: dict, kind: str) -> str:
    """"hit" or "miss" if the compile looked `kind`'s cache up, else "off"."""
    if after[f"{kind}_hit"] > before[f"{kind}_hit"]:
        return "hit"
    return "miss" if after[f"{kind}_miss"] > before[f"{kind}_miss"] else "off"


def warm_up() -> None:
    """What Inductor's first compile in a process pays besides its imports, paid once by the warm process
    workers fork from (measured ≈ 3-5 s per worker): the CPU's vector ISA, probed by compiling and loading
    test programs; the hash of torch's own sources its cache keys hold; the C++ builder's imports. Each is
    kept by torch in the process (functools caches), so forked workers start with it."""
    import torch.utils.cpp_extension  # noqa: F401 - the builder's setuptools and distutils imports
    from torch._inductor import cpu_vec_isa
    from torch._inductor.codecache import torch_key

    cpu_vec_isa.pick_vec_isa()
    torch_key()


class InductorPath(Path):
    """torch.compile(module) with Inductor on CPU."""

    name = "inductor"
    description = "torch.compile(module, dynamic=False) with the default (Inductor) backend on CPU"
    packages = ("torch",)
    warm_imports = ("torch", "torch.export", "torch._dynamo", "torch._inductor.compile_fx",
                    "harness.paths.inductor:warm_up")
    script_imports = ""
    emulate = False
    cache_facts = ("inductor_fx_graph_cache", "inductor_aot_autograd_cache")

    def _config(self):
        import torch._inductor.config as inductor_config

        if self.emulate:
            return inductor_config.patch(emulate_precision_casts=True)
        return contextlib.nullcontext()

    def script_code(self) -> str:
        patch = ("torch._inductor.config.patch(emulate_precision_casts=True), "
                 if self.emulate else "")
        return f'''\
def run_path(model, example, x):
    """{self.name}: {self.description}"""
    torch._dynamo.reset()  # a fresh compile: nothing reused from another torch.compile
    compiled = torch.compile(model, dynamic=False)
    with {patch}torch.no_grad():
        compiled(*example)  # the first call traces and compiles
    with torch.no_grad(), torch.compiler.set_stance("fail_on_recompile"):
        return to_numpy(compiled(*example))
'''

    def _compile(self, module, args) -> tuple:
        """A freshly compiled OptimizedModule (compiled on `args`) and its generation."""
        import torch

        torch._dynamo.reset()
        _LIVE["generation"] += 1
        compiled = torch.compile(module, dynamic=False)
        with self._config(), torch.no_grad():
            compiled(*args)
        return compiled, _LIVE["generation"]

    def prepare(self, spec, module, example) -> Prepared:
        import torch

        args = example_args(example)
        with _LOCK, stage("compile"):
            before = _counters()
            compiled, generation = self._compile(module, args)
            after = _counters()
        state = {"compiled": compiled, "generation": generation}
        layout = spec.layout

        def run_fn(x):
            inputs = tuple(to_torch(a, layout) for a in input_arrays(x))
            with _LOCK:
                if state["generation"] != _LIVE["generation"]:
                    # another prepare reset Dynamo since: compile this case again, as it was
                    state["compiled"], state["generation"] = self._compile(module, args)
                with torch.no_grad(), torch.compiler.set_stance("fail_on_recompile"):
                    return to_numpy(state["compiled"](*inputs))

        facts = {
            "inductor_emulate_precision_casts": self.emulate,
            "inductor_graphs": after["graphs"] - before["graphs"],
            "inductor_graph_breaks": after["breaks"] - before["breaks"],
            "inductor_fx_graph_cache": _cache_status(before, after, "fx"),
            "inductor_aot_autograd_cache": _cache_status(before, after, "aot"),
        }
        return Prepared(run_fn, facts)


class InductorEmulatePath(InductorPath):
    """As `inductor`, with emulate_precision_casts=True around the compile."""

    name = "inductor-emulate"
    description = ("torch.compile(module, dynamic=False) with Inductor on CPU and "
                   "torch._inductor.config.emulate_precision_casts=True (eager's roundings kept)")
    emulate = True
