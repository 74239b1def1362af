"""The `onnxruntime` and `onnxruntime-fused` paths: torch.onnx.export -> ONNX Runtime on CPU.

    torch.onnx.export(module, args, dynamo=True)                     (stage "export")
      -> onnxruntime.InferenceSession(model, CPUExecutionProvider)    (stage "compile")
           graph_optimization_level ORT_DISABLE_ALL (`onnxruntime`)
                                    ORT_ENABLE_ALL  (`onnxruntime-fused`)
      -> session.run                                                  (stage "run")

Choices, written down:

* `onnxruntime` turns every graph optimization off, so the exported graph's
  own ops run as they are: it tests the exporter and ORT's kernels.
  `onnxruntime-fused` turns them all on, as a deployment does: LayerNormFusion,
  SimplifiedLayerNormFusion (RMSNorm), SkipLayerNormFusion, cast elimination,
  constant folding and the NCHWc layout pass rewrite the norm. Which fusions
  fired is read from the optimized model ORT writes
  (SessionOptions.optimized_model_filepath): `facts` lists the op types of
  the exported model, of the optimized one, and those the optimizer added.
* The exporter's defaults are kept (its opset, its onnxscript optimizer, the
  parameters as initializers): that is what `torch.onnx.export(..., dynamo=True)`
  gives a user. Its progress prints, logs and warnings are kept quiet.
* One intra-op thread (and one inter-op), as the harness's workers give torch:
  sums in one order, no oversubscription of shared cores.
* ONNX has no memory format: a channels_last case runs on its logical (NCHW)
  values, which is what every path receives.
* bfloat16 crosses as raw 16-bit words in an OrtValue typed BFLOAT16 (NumPy
  has no bfloat16 ORT understands), in and out, bit for bit.
* `unsupported`, with ORT's own message: a model the CPU provider has no
  kernel for (NOT_IMPLEMENTED "Could not find an implementation for Mul(14)"
  in bfloat16, checked with onnxruntime 1.32: Mul, BatchNormalization,
  InstanceNormalization have no bfloat16 CPU kernel; the RMSNorm and
  LayerNormalization kernels do), and an op the exporter emits in bfloat16 at
  an opset whose ONNX schema has no bfloat16 for it (InstanceNormalization-6
  at the exporter's opset 20; at opset 22 ORT's CPU provider still has no
  bfloat16 kernel for it). Any other failure is an `error` of its stage.
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import tempfile
import warnings
import weakref

import numpy as np

from harness.paths._backward import joint_facts
from harness.paths.base import (FRONTEND_MEMO, ONNX_REGISTRY_MEMO, Path, Prepared, Unsupported, dynamic_of, example_args,
                                export_program, input_arrays, is_backward, stage, symbolic_export, symbolic_facts,
                                symbolic_shapes)

_BF16 = "bfloat16"


@contextlib.contextmanager
def quiet_export():
    """torch.onnx's progress prints, its registration warnings and library warnings, kept off the log."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "onnxscript", "onnx_ir")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def op_types(model) -> list[str]:
    """Sorted unique op types of an ONNX ModelProto's graph ("com.microsoft." kept off)."""
    return sorted({n.op_type for n in model.graph.node})


def unsupported_reason(message: str, dtypes: set[str]) -> str | None:
    """Why ORT cannot take the model, if its session error says so; None for any other error."""
    kernel = re.search(r"Could not find an implementation for (\S+?) node", message)
    if kernel:
        return f"onnxruntime's CPU provider has no kernel for {kernel.group(1)} with these types ({', '.join(sorted(dtypes))})"
    if _BF16 in dtypes and "Type Error: Type 'tensor(bfloat16)'" in message:
        op = re.search(r"of operator \((\w+)\)", message)
        where = op.group(1) if op else "an op"
        return (f"the exported model has a bfloat16 {where}, which its ONNX opset does not allow "
                "and onnxruntime's CPU provider does not run")
    return None


def onnx_model(model, example, dynamic=None):
    """torch.onnx.export(model, example, dynamo=True)'s ModelProto, under no_grad; `model` a module, or an
    ExportedProgram of it (the exporter then starts from it); a gradient case's Backward, torch's joint graph.
    With `dynamic` (export_program's symbolic dims) the module is exported symbolic first: the ONNX model's dims
    are then named (dim_param), dynamic axes."""
    import torch

    if is_backward(model):  # torch.export of its joint graph: the exporter's own capture cannot trace autograd.grad
        model = export_program(model, example, dynamic)
    if dynamic and isinstance(model, torch.nn.Module):
        model = export_program(model, example, dynamic)
    with torch.no_grad():
        return torch.onnx.export(model, example, dynamo=True, verbose=False).model_proto


def session_options(level: str, optimized_path):
    """ORT's options: the graph optimization level named `level`, one thread each (as the workers give torch:
    sums in one order), errors only in the log; ORT writes the model it runs to `optimized_path` if given."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: no "serializing an NCHWc model" warning
    if optimized_path:
        options.optimized_model_filepath = optimized_path
    return options


def cpu_session(model_bytes, options):
    """An InferenceSession on the CPU provider over a serialised ONNX model."""
    import onnxruntime as ort

    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def ort_value(a: np.ndarray):
    """An OrtValue on `a`'s memory with exactly its bits (bfloat16 as raw words typed BFLOAT16)."""
    import onnxruntime as ort
    from onnx import TensorProto

    if a.dtype.name == "bfloat16":
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16), TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(a)


def session_runner(session):
    """run(arrays) -> the output as NumPy (a tuple for several), written by ORT into buffers of their declared
    types."""
    import ml_dtypes
    import onnxruntime as ort
    from onnx import TensorProto

    # ONNX element type -> (the NumPy dtype its bits are held in, onnx.TensorProto's enum name)
    element = {"tensor(float)": ("float32", "FLOAT"), "tensor(float16)": ("float16", "FLOAT16"),
               "tensor(double)": ("float64", "DOUBLE"), "tensor(bfloat16)": ("uint16", "BFLOAT16")}
    inputs, outputs = session.get_inputs(), session.get_outputs()
    for out in outputs:
        if out.type not in element:
            raise RuntimeError(f"unexpected output {out.type} of shape {out.shape}")

    def run(arrays: tuple) -> np.ndarray | tuple:
        arrays = tuple(np.ascontiguousarray(a) for a in arrays)
        binding = session.io_binding()
        for i, a in zip(inputs, arrays):
            binding.bind_ortvalue_input(i.name, ort_value(a))
        got, sizes = [], {d: n for i, a in zip(inputs, arrays) for d, n in zip(i.shape, a.shape)}  # a named dim's size
        for out in outputs:  # a model of several outputs: each bound to its own buffer, in order
            np_name, onnx_name = element[out.type]
            words = np.empty([sizes.get(d, d) for d in out.shape], np_name)
            binding.bind_ortvalue_output(out.name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                words, getattr(TensorProto, onnx_name)))
            got.append(words.view(ml_dtypes.bfloat16) if onnx_name == "BFLOAT16" else words)
        session.run_with_iobinding(binding)
        return got[0] if len(got) == 1 else tuple(got)

    return run


# The ONNX model exported from each ExportedProgram the runner shared, for the other ONNX Runtime path.
_MODELS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _exported(module, example, exported=None, dynamic=None):
    """torch.onnx.export(..., dynamo=True)'s ModelProto (the "export" stage).

    Given the runner's ExportedProgram of the module (made under no_grad,
    non-strict, as the exporter's own first capture is), the exporter starts
    from it: the same ONNX bytes as from the module (checked on 114 smoke and
    nightly structures), and the program is left unchanged. Both paths of a
    structure get the same program, so the second reuses the first's model
    (read, never changed: sessions are built from its bytes): the exporter's
    decompositions, translation and optimizer are most of a path's compile
    time. Without one (the shared export failed, or a caller prepares
    directly) the module is exported as a user does, with the exporter's
    fallbacks.
    """
    if exported is not None and exported in _MODELS:
        return _MODELS[exported]
    with stage("export"), quiet_export():
        model = onnx_model(exported if exported is not None else module, example_args(example), dynamic)
    if exported is not None:
        _MODELS[exported] = model
    return model


class OnnxRuntimePath(Path):
    """torch.onnx.export(dynamo=True) -> ONNX Runtime CPU, graph optimizations off."""

    name = "onnxruntime"
    description = ("torch.onnx.export(dynamo=True) -> onnxruntime CPU InferenceSession "
                   "with graph optimizations off (ORT_DISABLE_ALL)")
    packages = ("torch", "onnxruntime", "onnx", "onnxscript")
    warm_imports = ("torch", "torch.export", "torch.onnx", "onnx", "onnxscript", "onnxruntime", FRONTEND_MEMO,
                    ONNX_REGISTRY_MEMO)
    script_imports = "import tempfile\n\nimport onnx\n"
    pipeline = (is_backward, symbolic_shapes, export_program, symbolic_export, onnx_model, op_types, session_options,
                cpu_session, ort_value, session_runner)
    takes_shared_export = True
    artifact_cacheable = True
    symbolic = "ONNX dynamic axes: torch.onnx.export of the symbolic torch.export (Dim) names the dims (dim_param)"
    level = "ORT_DISABLE_ALL"
    trains = "torch's joint graph exported to ONNX as an inference graph"

    def script_calls(self) -> str:
        optimized = listing = ""
        if self.level != "ORT_DISABLE_ALL":  # the model after ORT's rewrites, to see which fusions fired
            optimized = "    optimized = tempfile.TemporaryDirectory()  # ORT writes the model it runs here\n"
            listing = ('    print("ONNX ops after ORT\'s optimizations:",\n'
                       '          ", ".join(op_types(onnx.load(optimized.name + "/optimized.onnx"))))\n'
                       "    optimized.cleanup()\n")
        where = 'optimized.name + "/optimized.onnx"' if optimized else "None"
        return f'''\
def run_path(model, example, x):
    """{self.name}: {self.description}"""
    exported = onnx_model(model, example, DYNAMIC)
    print("exported ONNX ops:", ", ".join(op_types(exported)))
{optimized}    session = cpu_session(exported.SerializeToString(), session_options({self.level!r}, {where}))
{listing}    return session_runner(session)(x)
'''

    def prepare(self, spec, module, example, exported=None) -> Prepared:
        model = _exported(module, example, exported, dynamic_of(spec))
        exported_ops = op_types(model)
        dtypes = {spec.dtype, spec.weight_dtype}

        with stage("compile"), tempfile.TemporaryDirectory(prefix="normdiff-ort-") as tmp:
            import onnx

            optimized_path = os.path.join(tmp, "optimized.onnx") if self.level != "ORT_DISABLE_ALL" else None
            built = model.SerializeToString()
            try:
                session = cpu_session(built, session_options(self.level, optimized_path))
            except Exception as exc:  # noqa: BLE001 - sorted into unsupported or a compile error
                reason = unsupported_reason(str(exc), dtypes)
                if reason:
                    raise Unsupported(reason) from exc
                raise
            run = session_runner(session)
            facts = {"onnx_opset": max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                     "onnx_ops": exported_ops, "ort_optimization": self.level, **symbolic_facts(spec, exported),
                     **(joint_facts(exported) if spec.grad and exported is not None else {})}
            if optimized_path:
                optimized_ops = op_types(onnx.load(optimized_path))
                facts["ort_ops"] = optimized_ops
                facts["ort_fused"] = sorted(set(optimized_ops) - set(exported_ops))
                with open(optimized_path, "rb") as fh:
                    built = fh.read()  # what the session runs, after ORT's rewrites

        return Prepared(lambda x: run(input_arrays(x)), facts, built=built)

    def artifact(self, prepared: Prepared) -> bytes | None:
        """The model the session runs: the exported one, or ORT's optimized one (`-fused`)."""
        return prepared.built if isinstance(prepared.built, bytes) else None

    def restore(self, spec, data: bytes) -> Prepared:
        """A session on the stored model; an optimized one is not optimized again (ORT_DISABLE_ALL)."""
        run = session_runner(cpu_session(data, session_options("ORT_DISABLE_ALL", None)))
        return Prepared(lambda x: run(input_arrays(x)), {}, built=data)


class OnnxRuntimeFusedPath(OnnxRuntimePath):
    """As `onnxruntime`, with every graph optimization on (ORT_ENABLE_ALL)."""

    name = "onnxruntime-fused"
    control_path = "onnxruntime"
    description = ("torch.onnx.export(dynamo=True) -> onnxruntime CPU InferenceSession with every graph "
                   "optimization on (ORT_ENABLE_ALL: LayerNormFusion, SimplifiedLayerNormFusion, ...)")
    level = "ORT_ENABLE_ALL"
