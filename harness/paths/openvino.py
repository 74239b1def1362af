"""The `openvino` and `openvino-bf16` paths: ov.convert_model -> compile_model on CPU.

    openvino.convert_model(module, example_input=args)        (stage "export": OpenVINO's
                                                                PyTorch frontend)
      -> openvino.Core().compile_model(model, "CPU", config)   (stage "compile": the CPU
                                                                plugin's transformations)
           default precision (`openvino`)
           INFERENCE_PRECISION_HINT=bf16 (`openvino-bf16`)
      -> infer request                                         (stage "run")

Choices, written down (docs/paths.md says why):

* The module is converted in memory and compiled from there
  (`ov.compile_model(ov.convert_model(...))`), without `ov.save_model`, whose
  default compresses float32 weights to float16: a float16 weight feeding a
  float32 norm is a case of its own (`weight_dtype`), not a path.
* `openvino` keeps the plugin's default inference precision: float32 on a
  CPU without AMX, where float16 and bfloat16 models run their ops in the
  model's own type; OpenVINO picks bf16 by default on AMX CPUs, so the
  compiled model's precision is a fact (`ov_inference_precision`).
  `openvino-bf16` sets the hint OpenVINO documents for bfloat16 CPUs.
* One inference thread (INFERENCE_NUM_THREADS=1), as torch gets in the
  workers: sums in one order.
* float16 and float32 cross as NumPy arrays; bfloat16 as raw 16-bit words
  written into and read from tensors typed bf16, bit for bit.
* `facts`: the runtime model's nodes (layerType:runtimePrecision, sorted,
  unique), whether the plugin fused an RMS or an MVN node, the compiled
  model's inference precision.
* `unsupported`, with OpenVINO's words: an op its PyTorch frontend has no
  rule for, or a node the CPU plugin has no implementation for. A converter
  or a transformation that throws is an `error` naming its failed check.
"""
from __future__ import annotations

import re

import numpy as np

from harness.paths import _ov_intermediates as ovi
from harness.paths._ov_intermediates import compile_cpu, infer_all
from harness.paths.base import (Capture, Intermediate, IntermediatesUnavailable, Path, Prepared, Unsupported,
                                dynamic_of, example_args, export_program, input_arrays, is_backward, stage,
                                symbolic_facts)


def partial_shapes(args: tuple, dynamic):
    """The ov.PartialShape of each input: x's dims `dynamic[0]` (export_program's symbolic dims) as
    ov.Dimension(1, max), as are those of an extra input of x's very shape; every other dim its size."""
    import openvino as ov

    dims, top = dynamic
    return [ov.PartialShape([ov.Dimension(1, top) if i in dims and t.shape == args[0].shape else ov.Dimension(n)
                             for i, n in enumerate(t.shape)]) for t in args]


def convert(module, args: tuple, dynamic=None):
    """ov.convert_model of the eval-mode module on its example arguments, owning copies of its weights; with
    `dynamic` (the symbolic dims) its inputs get partial_shapes, bounded dynamic dims.

    convert_model's default (share_weights=True) leaves the constants in the
    torch parameters' memory, and the CPU plugin may run on them in place: a
    compiled model that outlives its module then reads freed memory (seen as
    errors of 1e+31 in a worker that had dropped the module).
    """
    import openvino as ov

    if is_backward(module):  # a gradient case: torch's joint graph, as OpenVINO takes an ExportedProgram
        module = export_program(module, args)  # its symbolic dims, if any: the partial shapes below
    shapes = {}
    if dynamic:
        shapes["input"] = partial_shapes(args, dynamic)
    return ov.convert_model(module, example_input=args, share_weights=False, **shapes)


def runtime_nodes(compiled) -> list[str]:
    """The nodes the CPU plugin runs, as "layerType:runtimePrecision" (sorted, unique)."""
    found = set()
    for op in compiled.get_runtime_model().get_ops():
        info = op.get_rt_info()
        found.add(f"{info['layerType'].astype(str)}:{info['runtimePrecision'].astype(str)}")
    return sorted(found)


def run_infer(compiled, arrays: tuple) -> np.ndarray | tuple:
    """One inference: its output in its own dtype (bfloat16 crosses as raw words); a tuple of them, in order, for
    a model of several outputs."""
    outs = infer_all(compiled, arrays)
    return outs[0] if len(outs) == 1 else tuple(outs)


_REFUSED = (
    re.compile(r"(No conversion rule found for operations?:[^\n]*)"),
    re.compile(r"(Unsupported operation of type: [^\n]*)"),
)
_FAILED_OPS = re.compile(r"Conversion is failed for: ([^\n]*)")
_CHECK = re.compile(r"(Check '[^\n]*)")


def unsupported_reason(message: str) -> str | None:
    """Why OpenVINO refuses the model (an op it has no rule or no CPU node for), in its own words; else None."""
    for pattern in _REFUSED:
        found = pattern.search(message)
        if found:
            return f"openvino: {found.group(1).strip()[:300]}"
    return None


def failure_summary(message: str) -> str | None:
    """The op a conversion failed on and the first check that failed, where OpenVINO's error names them."""
    checks = [c for c in _CHECK.findall(message) if not c.startswith("Check 'false'")]  # 'false': the report's own
    if not checks:
        return None
    ops = _FAILED_OPS.search(message)
    where = f"converting {ops.group(1).strip()}: " if ops else ""
    return f"openvino: {where}{checks[0].strip()}"[:400]


def _refused(exc: Exception) -> Exception | None:
    """Unsupported for a refusal; a RuntimeError naming the failed check for another failure (its first line
    says only where OpenVINO caught it); None: the exception says it itself."""
    reason = unsupported_reason(str(exc))
    if reason:
        return Unsupported(reason)
    summary = failure_summary(str(exc))
    return RuntimeError(summary) if summary else None


def _reraise(exc: Exception):
    replacement = _refused(exc)
    if replacement is None:
        raise exc
    raise replacement from exc


_CORES: list = []


def _core():
    """The process's one ov.Core: its CPU plugin outlives every model compiled with it."""
    import openvino as ov

    if not _CORES:
        _CORES.append(ov.Core())
    return _CORES[0]


class OpenVinoPath(Path):
    """ov.convert_model -> compile_model on CPU, the plugin's default precision."""

    name = "openvino"
    description = "openvino.convert_model(module) -> compile_model('CPU'), default inference precision"
    packages = ("torch", "openvino")
    warm_imports = ("torch", "openvino", "openvino.frontend.pytorch")
    script_imports = "import openvino as ov\n"
    pipeline = (is_backward, export_program, partial_shapes, convert, compile_cpu, runtime_nodes, ovi.ov_array,
                infer_all, run_infer, ovi.computing_nodes, ovi.value_nodes, ovi.with_results, ovi.stored_dtypes,
                ovi.readable_nodes, ovi.exposed_runner)
    takes_shared_export = False
    trains = "torch's joint graph (its ExportedProgram) converted as an inference graph"
    artifact_cacheable = True
    restore_takes_build = False
    has_intermediates = True
    symbolic = "OpenVINO PartialShape: convert_model(input=) with bounded dynamic dims, one compiled model"
    # INFERENCE_PRECISION_HINT, or "" for the plugin's default.
    precision_hint = ""

    def config(self) -> dict:
        config = {"INFERENCE_NUM_THREADS": 1}
        if self.precision_hint:
            config["INFERENCE_PRECISION_HINT"] = self.precision_hint
        return config

    def script_calls(self) -> str:
        return f'''\
CONFIG = {self.config()!r}


def run_path(model, example, x):
    """{self.name}: {self.description}"""
    core = ov.Core()
    compiled = compile_cpu(core, convert(model, example, DYNAMIC), CONFIG)
    print("OpenVINO runtime nodes (layerType:runtimePrecision):", ", ".join(runtime_nodes(compiled)))
    return run_infer(compiled, x)


def intermediates(model, example, x):
    """The model's inner nodes given Results where that changes nothing the CPU plugin computes, run once."""
    if is_backward(model):  # as the path's hook: a joint graph's fused backward nodes are not checked
        raise RuntimeError("a gradient case's joint graph is not read on OpenVINO")
    run, unread = exposed_runner(ov.Core(), convert(model, example, DYNAMIC), CONFIG, x)
    if unread:
        print("OpenVINO nodes the CPU plugin fused (not read: a Result on them changes what it computes):",
              ", ".join(unread))
    return run(x)
'''

    def intermediates(self, spec, module, example):
        """The model converted as `prepare` converts it, compiled with Results on the nodes that can be read
        without changing what the plugin computes (_ov_intermediates), checked on `example`."""
        import torch

        from harness.core.tensors import to_numpy

        if is_backward(module):  # the reader's fusion check was made on forward models only
            raise IntermediatesUnavailable("a gradient case's joint graph is not read on OpenVINO (which of its "
                                           "backward nodes the CPU plugin fuses is not checked)")
        args = example_args(example)
        with torch.no_grad():
            model = convert(module, args, dynamic_of(spec))
        run, unread = ovi.exposed_runner(_core(), model, self.config(), tuple(to_numpy(t) for t in args))
        method = ovi.METHOD + (f"; fused by the CPU plugin, not read: {', '.join(unread)}" if unread else "")

        def capture(x) -> Capture:
            items, output, rerun = run(input_arrays(x))
            return Capture([Intermediate(*item) for item in items], output, rerun, method)

        return capture

    def prepare(self, spec, module, example) -> Prepared:
        import torch

        with stage("export"):
            try:
                with torch.no_grad():
                    model = convert(module, example_args(example), dynamic_of(spec))
            except Exception as exc:  # noqa: BLE001 - sorted into unsupported or an export error
                _reraise(exc)
        core = _core()
        with stage("compile"):
            try:
                compiled = compile_cpu(core, model, self.config())
            except Exception as exc:  # noqa: BLE001 - sorted into unsupported or a compile error
                _reraise(exc)
            facts = {**self._facts(compiled), **symbolic_facts(spec)}
        return Prepared(lambda x: run_infer(compiled, input_arrays(x)), facts, built=compiled)

    def _facts(self, compiled) -> dict:
        nodes = runtime_nodes(compiled)
        kinds = {n.split(":")[0] for n in nodes}
        precision = compiled.get_property("INFERENCE_PRECISION_HINT")  # an ov.Type: "bf16", "f32"
        return {"ov_inference_precision": precision.to_string() if hasattr(precision, "to_string") else str(precision),
                "ov_runtime_nodes": nodes, "ov_fused_rms": "RMS" in kinds, "ov_fused_mvn": "MVN" in kinds}

    def artifact(self, prepared: Prepared) -> bytes | None:
        """The compiled model as the CPU plugin exports it (export_model: its blob, read back by import_model)."""
        import io

        if prepared.built is None:
            return None
        stream = io.BytesIO()
        prepared.built.export_model(stream)
        return stream.getvalue()

    def restore(self, spec, data: bytes) -> Prepared:
        """The exported blob imported by the CPU plugin with the same config."""
        import io

        compiled = _core().import_model(io.BytesIO(data), "CPU", self.config())
        return Prepared(lambda x: run_infer(compiled, input_arrays(x)), {}, built=compiled)


class OpenVinoBf16Path(OpenVinoPath):
    """As `openvino`, with INFERENCE_PRECISION_HINT bf16 (OpenVINO's mode for bfloat16 CPUs)."""

    name = "openvino-bf16"
    control_path = "openvino"
    description = ("openvino.convert_model(module) -> compile_model('CPU', "
                   "INFERENCE_PRECISION_HINT='bf16')")
    precision_hint = "bf16"
