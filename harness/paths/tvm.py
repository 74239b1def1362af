"""The `tvm` and `tvm-decompose` paths (docs/contracts.md §2).

    torch.export.export
      -> tvm.relax.frontend.torch.from_exported_program      (stage "compile", step "import")
      -> [relax.transform.DecomposeOpsForTraining]           (tvm-decompose only)
      -> [relax.transform.DecomposeOpsForInference]          (tvm-decompose-inference only)
      -> tvm.compile(target="llvm") -> relax.VirtualMachine  (stage "compile")
      -> vm["main"](x)                                       (stage "run")

Choices, written down:

* Parameters are embedded as constants (`keep_params_as_input=False`, the
  importer's default). That is how a deployed model is compiled, it lets the
  pipeline fold/fuse them like any constant, and `main` then takes exactly one
  argument, the input. The structure key already includes everything the
  parameters depend on, so one artifact per structure is right.
* The importer's `run_ep_decomposition=True` default is kept: it is what a
  user calling `from_exported_program(ep)` gets. torch's core-ATen table keeps
  layer_norm whole (it becomes `R.nn.layer_norm`), so the seed
  apache/tvm#20909 still reaches Relax as a single op.
* Compilation runs under `PassContext(opt_level=3)`, as in the seed's
  reproduction script.
* Input and output cross TVM through `tvm.runtime.tensor(ndarray)` and
  `Tensor.numpy()`. In 0.27 both carry bfloat16 as ml_dtypes.bfloat16 bit for
  bit (tests/paths/test_tvm.py checks every bf16/f16 bit pattern); should a build hand back raw
  uint16 bits instead, they are re-viewed, never converted.
* The output keeps the dtype TVM produced: a dtype that differs from eager's
  is a finding (dtype_mismatch), so nothing here casts it.
* The VM returns the importer's return tuple (a tvm_ffi Array); a one-element
  tuple is unwrapped.
* A gradient case (a Backward module) takes TVM's own training flow instead
  (harness.paths._tvm_gradient: relax.transform.Gradient, after
  DecomposeOpsForTraining on `tvm-decompose`); `tvm-decompose-inference`
  cannot train.
"""
from __future__ import annotations

import contextlib
import copy
import os
import tempfile
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from harness.paths import _tvm_gradient as grad
from harness.paths._tvm_gradient import gradient_module, imported_vjp, vjp_target  # exposed_runner's, as pasted
from harness.paths._relax_intermediates import METHOD, expose, returned_var, tensor_bindings, tvm_array
from harness.paths.base import (FRONTEND_MEMO, Capture, Intermediate, Path, Prepared,
                                dynamic_of, example_args, export_program, input_arrays, is_backward, stage,
                                symbolic_export, symbolic_facts, symbolic_shapes)


# -- the pipeline: what prepare, run and intermediates call, and the repro scripts paste (one definition) --------

def relax_ops(mod, func: str = "main") -> list[str]:
    """Sorted, de-duplicated names of the Relax ops `func` calls."""
    import tvm
    from tvm import relax

    found: set[str] = set()  # post_order_visit calls the lambda on every expression: each op call adds its name
    relax.analysis.post_order_visit(mod[func], lambda e: isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op)
                                    and found.add(str(e.op.name)))
    return sorted(found)


def imported_module(ep):
    """The Relax module of an ExportedProgram: from_exported_program, the parameters as constants."""
    from tvm.relax.frontend.torch import from_exported_program

    return from_exported_program(ep, keep_params_as_input=False)


def decomposed(mod, decompose):
    """`mod` after the relax.transform pass named `decompose` (the path's; "" for none)."""
    from tvm import relax

    return getattr(relax.transform, decompose)()(mod) if decompose else mod


def compiled_executable(mod):
    """tvm.compile(mod, target="llvm") under PassContext(opt_level=3)."""
    import tvm

    with tvm.transform.PassContext(opt_level=3):
        return tvm.compile(mod, target="llvm")


def vm_main(executable):
    """The `main` of a Relax VM on the CPU over `executable` (tvm.compile's, or a loaded library)."""
    import tvm
    from tvm import relax

    return relax.VirtualMachine(executable, tvm.cpu())["main"]


def tvm_tensor(a):
    """A TVM tensor on the CPU holding NumPy array `a`'s values (bfloat16 as ml_dtypes.bfloat16)."""
    import tvm

    return tvm.runtime.tensor(np.ascontiguousarray(a), tvm.cpu())


def output_tensors(result) -> list:
    """The output tensors of a VM call, in order (the importer returns a tuple, nested for several outputs)."""
    import tvm

    if isinstance(result, tvm.runtime.Tensor):
        return [result]
    if isinstance(result, (list, tuple)) or hasattr(result, "__len__"):
        return [t for item in list(result) for t in output_tensors(item)]
    raise TypeError(f"unexpected VM result {type(result).__name__}")


def main_output(main, arrays):
    """`main` on the inputs (a tuple of NumPy arrays): its output in TVM's dtype as NumPy (a tuple of them for a
    model of several outputs)."""
    outs = tuple(tvm_array(t) for t in output_tensors(main(*(tvm_tensor(a) for a in arrays))))
    return outs[0] if len(outs) == 1 else outs


def gradient_output(main, arrays):
    """A differentiated `main` (_tvm_gradient) on the inputs and cotangents: the gradients as NumPy, in order (its
    first output, the differentiated sum's value, dropped; one gradient unwrapped, as main_output does)."""
    outs = tuple(tvm_array(t) for t in output_tensors(main(*(tvm_tensor(a) for a in arrays)))[1:])
    return outs[0] if len(outs) == 1 else outs


def exposed_runner(model, example, decompose, dynamic=None):
    """The path's pipeline on `model` with every binding of main exposed (_relax_intermediates), compiled once.

    `example` is the tuple of the model's input tensors, `decompose` the path's pass, `dynamic` the symbolic dims
    (export_program's); a Backward `model`: the training flow's differentiated main. Returns run(x), x the inputs
    as a tuple of NumPy arrays: ([(name, op, dtype, value)], index of the returned one or None, the re-run's output).
    """
    if is_backward(model):  # as run_path: Gradient of sum(out * cotangent), whose value main returns first (dropped)
        target = export_program(vjp_target(model.forward_module, model.n_inputs), example)
        mod = gradient_module(decomposed(imported_vjp(target), decompose), model.n_inputs)
    else:
        mod = decomposed(imported_module(export_program(model, example, dynamic)), decompose)
    exposed, names, output = expose(mod)
    main = vm_main(compiled_executable(exposed))

    def run(x):
        result = list(main(*(tvm_tensor(a) for a in x)))
        values = [tvm_array(t) for t in result[1:]]
        items = [(name, op, str(v.dtype), v) for (name, op), v in zip(names, values)]
        outs = tuple(tvm_array(t) for t in output_tensors(result[0]))[int(is_backward(model)):]  # each output
        return items, output, outs[0] if len(outs) == 1 else outs

    return run


class TvmPath(Path):
    """torch.export -> Relax -> LLVM -> Relax VM on CPU."""

    name = "tvm"
    description = "torch.export -> from_exported_program -> tvm.compile(target='llvm') -> Relax VM"
    packages = ("torch", "apache-tvm")
    warm_imports = ("torch", "torch.export", "tvm", "tvm.relax", "tvm.relax.frontend.torch", FRONTEND_MEMO)
    script_imports = "import tvm\nfrom tvm import relax\n"
    # The forward's functions, then the training flow's (_tvm_gradient), which a path that cannot train leaves out.
    forward_pipeline = (is_backward, symbolic_shapes, export_program, symbolic_export, imported_module, decomposed,
                        relax_ops, compiled_executable, vm_main, tvm_tensor, tvm_array, output_tensors, main_output,
                        returned_var, tensor_bindings, expose, exposed_runner)
    pipeline = forward_pipeline + (grad.vjp_target, grad.imported_vjp, grad.no_gradient_ops,
                                   grad.gradient_module, gradient_output)
    takes_shared_export = True
    artifact_cacheable = True
    has_intermediates = True
    symbolic = "TVM SizeVars: from_exported_program of the symbolic torch.export (Dim), one Relax VM for every size"
    # The relax.transform pass applied before compile (a name), or "" for none.
    decompose = ""
    trains = "relax.transform.Gradient of the norm's Relax import, without a decomposition"

    def script_calls(self) -> str:
        training = f'''\
    if is_backward(model):  # a gradient case: Relax's training flow on sum(out * cotangent)
        mod = decomposed(imported_vjp(export_program(vjp_target(model.forward_module, model.n_inputs), example)),
                         {self.decompose!r})
        print("Relax ops differentiated:", ", ".join(relax_ops(mod)),
              "; without a gradient:", no_gradient_ops(relax_ops(mod)))
        return gradient_output(vm_main(compiled_executable(gradient_module(mod, model.n_inputs))), x)
''' if self.trains else ""
        return f'''\
def run_path(model, example, x):
    """{self.name}: {self.description}"""
{training}    mod = decomposed(imported_module(export_program(model, example, DYNAMIC)), {self.decompose!r})
    print("Relax ops:", ", ".join(relax_ops(mod)))
    return main_output(vm_main(compiled_executable(mod)), x)


def intermediates(model, example, x):
    """Every binding of main returned as an extra output, recompiled as run_path compiles, run once."""
    return exposed_runner(model, example, {self.decompose!r}, DYNAMIC)(x)
'''

    def intermediates(self, spec, module, example):
        """Every binding of main returned as an output, recompiled as `prepare` compiles (_relax_intermediates)."""
        run = exposed_runner(module, example_args(example), self.decompose, dynamic_of(spec))

        def capture(x) -> Capture:
            items, output, rerun = run(input_arrays(x))
            return Capture([Intermediate(*item) for item in items], output, rerun, METHOD)

        return capture

    def prepare(self, spec, module, example, exported=None) -> Prepared:
        if is_backward(module):
            return self._prepare_gradient(module, example_args(example), exported)
        with stage("export"):
            ep = exported if exported is not None else export_program(module, example_args(example), dynamic_of(spec))

        with stage("compile", step="import"):
            mod = decomposed(_imported(ep), self.decompose)
            ops = relax_ops(mod)

        with stage("compile"):
            build = _compiled(ep, mod)
            run_fn = _vm_runner(build.runnable)

        facts = {"tvm_decomposed": bool(self.decompose), "tvm_ops": ops, **symbolic_facts(spec, ep)}
        return Prepared(run_fn, facts, built=build)

    def _prepare_gradient(self, module, example, exported=None) -> Prepared:
        """Relax's training flow (_tvm_gradient): the vjp target exported, imported with its parameters as
        inputs, [decomposed], differentiated by relax.transform.Gradient, compiled. The joint graph the runner
        shares (`exported`) is not this path's, TVM differentiates the forward itself: it only names the
        structure, so that `tvm` and `tvm-decompose` export and import the vjp target once (_vjp_program)."""
        with stage("export"):
            ep = _vjp_program(module, example, exported)
        with stage("compile", step="import"):
            mod = decomposed(_per_program(_VJP_IMPORTS, ep, lambda: grad.imported_vjp(ep)), self.decompose)
            differentiated = relax_ops(mod)
        with stage("compile", step="gradient"):
            mod = grad.differentiated(mod, module.n_inputs, differentiated)
            ops = relax_ops(mod)
        with stage("compile"):
            build = _compiled(ep, mod)
            run_fn = _vm_runner(build.runnable, gradient_output)
        facts = {"tvm_decomposed": bool(self.decompose), "tvm_gradient": "relax.transform.Gradient",
                 "tvm_differentiated_ops": differentiated, "tvm_ops": ops}
        return Prepared(run_fn, facts, built=build)

    def artifact(self, prepared: Prepared) -> bytes | None:
        """The shared library the executable was exported to (and run from), or None if it could not be linked."""
        return prepared.built.library if prepared.built is not None else None

    def restore(self, spec, data: bytes) -> Prepared:
        """The VM of a library `artifact` wrote, loaded with tvm.runtime.load_module."""
        return Prepared(_vm_runner(_loaded(data), gradient_output if spec.grad else main_output), {})


# The importer's module of an ExportedProgram the runner shared among the TVM paths: Relax passes return new
# modules and tvm.compile leaves its input as it was (checked: the printed module is unchanged after both), so
# `tvm` and the decompose paths can start from one import. Entries go with their program.
_IMPORTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
# A gradient case's vjp target (_tvm_gradient) by the runner's shared program (the joint graph: it names the
# structure), and the vjp target's import by its program; Gradient, like any Relax pass, leaves its input as it was.
_VJP_PROGRAMS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_VJP_IMPORTS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _per_program(table, ep, make):
    """make(), once per program `ep` (kept in `table` while the program lives). A failure is kept too: TVM's
    importer refusing a program (float16 x, float32 weights, …) refuses it for every TVM path."""
    try:
        value = table[ep]
    except (KeyError, TypeError):
        try:
            value = make()
        except Exception as exc:  # noqa: BLE001 - raised now, kept (a copy) for the structure's next paths
            _keep(table, ep, _failure(exc))
            raise
        _keep(table, ep, value)
    return _outcome(value)


def _keep(table, ep, value) -> None:
    with contextlib.suppress(TypeError):  # a program that cannot be weakly referenced: nothing kept
        if value is not None:
            table[ep] = value


@dataclass(frozen=True)
class _Failed:
    """A kept failure: a copy of the exception without its traceback (whose frames hold the program: a weak
    table's entry would keep its own key alive), raised again as a fresh copy at each look-up (_outcome)."""

    error: Exception


def _failure(exc) -> _Failed | None:
    """`exc` kept, or None: a MemoryError (of the moment: the worker's limit), or one that does not copy to the
    same words."""
    try:
        kept = None if isinstance(exc, MemoryError) else copy.copy(exc)
    except Exception:  # noqa: BLE001 - not kept: the next path tries again
        return None
    return _Failed(kept) if type(kept) is type(exc) and str(kept) == str(exc) else None


def _outcome(value):
    """The kept value, or the kept failure raised again."""
    if isinstance(value, _Failed):
        raise copy.copy(value.error)
    return value


def _imported(ep):
    """imported_module(ep), once per program."""
    return _per_program(_IMPORTS, ep, lambda: imported_module(ep))


def _vjp_program(module, example, exported=None):
    """The ExportedProgram of the vjp target of the Backward `module`, once per shared program `exported` of the
    structure and the example's sizes (exported afresh without a shared program)."""
    def export():
        return export_program(grad.vjp_target(module.forward_module, module.n_inputs), example)

    if exported is None:
        return export()
    by_sizes = _per_program(_VJP_PROGRAMS, exported, dict)
    sizes = tuple(_sizes(a) for a in example)  # a symbolic structure's sizes: each its own program
    if sizes not in by_sizes:
        by_sizes[sizes] = export()
    return by_sizes[sizes]


def _sizes(arg):
    """What torch.export specialises an example argument on: a tensor's shape, strides and dtype (else itself)."""
    return (tuple(arg.shape), tuple(arg.stride()), str(arg.dtype)) if hasattr(arg, "stride") else repr(arg)


@dataclass(frozen=True)
class LinkedBuild:
    """What one compile gives: the library it was exported to (None if it could not be linked) and what runs.

    tvm.compile leaves the kernels as an LLVM module; a VM made from it
    JIT-compiles them, and export_library emits them again as an object file,
    each a full LLVM code generation, each dearer than tvm.compile itself. So the
    library is exported once and the VM runs from it, loaded: one code
    generation, and a cold run computes with the very code a warm run loads
    from the cache (a deployed model is run the same way). Only when the
    library cannot be linked (no C compiler) does the VM JIT the executable.
    The repro script JITs it (no C compiler needed there): the same kernels.
    """

    library: bytes | None
    runnable: object  # the loaded library, or the executable itself


# The builds of the modules of each program, by the program (as _IMPORTS): a Relax pass that changes nothing
# gives the same module (DecomposeOpsForInference leaves every norm but batch_norm whole: most
# nightly structures), and tvm.compile of the same module gives the same executable, so the TVM paths of a
# structure compile each distinct module once.
_COMPILED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _compiled(ep, mod) -> LinkedBuild:
    """compiled_executable(mod), exported and loaded, once per structurally equal module of `ep`."""
    import tvm_ffi

    try:
        kept = _COMPILED.setdefault(ep, [])
    except TypeError:
        kept = []
    for seen, build in kept:
        if tvm_ffi.structural_equal(seen, mod):
            return _outcome(build)
    try:
        executable = compiled_executable(mod)
    except Exception as exc:  # noqa: BLE001 - a module tvm.compile refuses (legalization): for each path alike
        kept.extend([(mod, failed) for failed in [_failure(exc)] if failed is not None])
        raise
    try:
        library = _library(executable)
        build = LinkedBuild(library, _loaded(library))
    except Exception:  # noqa: BLE001 - no C compiler to link with: run the executable itself (JIT)
        build = LinkedBuild(None, executable)
    kept.append((mod, build))
    return build


def _library(executable) -> bytes:
    """The executable as one shared library (export_library links it with the C compiler)."""
    with tempfile.TemporaryDirectory(prefix="normdiff-tvm-") as tmp:
        lib = os.path.join(tmp, "lib.so")
        executable.export_library(lib)
        with open(lib, "rb") as fh:
            return fh.read()


def _loaded(data: bytes):
    """A library `_library` wrote, loaded with tvm.runtime.load_module (from a file of its own: dlopen keeps
    the first library it opened under a path)."""
    import tvm

    with tempfile.TemporaryDirectory(prefix="normdiff-tvm-") as tmp:
        lib = os.path.join(tmp, "lib.so")
        with open(lib, "wb") as fh:
            fh.write(data)
        return tvm.runtime.load_module(lib)  # dlopen'ed: the file may go


def _vm_runner(executable, outputs=main_output):
    """run_fn of a Relax VM over `executable` (tvm.compile's, or a loaded library); `outputs` reads a call's
    outputs (main_output, or gradient_output for a differentiated main)."""
    main = vm_main(executable)
    lock = threading.Lock()  # a VM keeps per-call state; serialise calls if threads share it

    def run_fn(x: np.ndarray) -> np.ndarray:
        with lock:
            return outputs(main, input_arrays(x))

    return run_fn


class TvmDecomposePath(TvmPath):
    """As `tvm`, with relax.transform.DecomposeOpsForTraining before compile
    (seed: apache/tvm#20909)."""

    name = "tvm-decompose"
    control_path = "tvm"
    description = ("torch.export -> from_exported_program -> DecomposeOpsForTraining -> "
                   "tvm.compile(target='llvm') -> Relax VM")
    decompose = "DecomposeOpsForTraining"
    trains = "DecomposeOpsForTraining, then relax.transform.Gradient (TVM's training flow)"


class TvmDecomposeInferencePath(TvmPath):
    """As `tvm`, with relax.transform.DecomposeOpsForInference before compile.

    Relax's batch_norm is training mode by default (it normalizes with the
    batch's statistics); DecomposeOpsForInference rewrites it with the moving
    mean and variance, which is what an eval-mode torch BatchNorm means. Other
    norms (layer_norm, group_norm, rms_norm) are left whole by this pass.
    """

    name = "tvm-decompose-inference"
    control_path = "tvm"
    description = ("torch.export -> from_exported_program -> DecomposeOpsForInference -> "
                   "tvm.compile(target='llvm') -> Relax VM")
    decompose = "DecomposeOpsForInference"
    pipeline = TvmPath.forward_pipeline
    trains = None
    cannot_train = ("DecomposeOpsForInference is TVM's inference flow (batch_norm on its moving statistics); "
                    "TVM's training flow is tvm-decompose's (DecomposeOpsForTraining, then Gradient)")
