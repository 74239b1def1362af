"""The FP64 NumPy reference of every pattern, and what it expects of an output.

The reference computes the norm's exact mathematics in float64 from the
case's rounded inputs and parameters (no intermediate rounding: the model's
deliberate roundings are the tolerance's business). Alongside the values it
says, per element, what the error model of `compare` needs: which
normalization row the element belongs to, its normalized value z, the row's
conditioning kappa, the effective weight, and the row length. It also says the
output dtype torch's type promotion gives and the narrowest dtype the pattern
deliberately rounds through.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from harness.core.dtypes import narrowest, promote
from harness.spec import CaseSpec, program_case
from harness.program import evaluate
from harness.oracle.inputs import Inputs
from harness.oracle.witness_error import program_witnesses


@dataclass(frozen=True)
class Reference:
    out: np.ndarray          # float64, the input's shape
    rows: np.ndarray         # int, row id of each element
    z: np.ndarray            # float64, the normalized value of each element
    kappa: np.ndarray        # float64, rms(x)/sqrt(var+eps) of each element's row
    weight: np.ndarray       # float64, the effective scale applied to z
    bias: np.ndarray         # float64, the shift added after scaling
    row_len: int             # elements a row's statistics are taken over
    out_dtype: str           # the output dtype torch promotion gives
    rounding_dtype: str      # narrowest dtype the model deliberately rounds through
    stat_dtype: str          # dtype the model deliberately computes statistics in
    # A program's own first-order bound (harness.program.evaluate), per element; None for catalog
    # styles, whose bound is the closed-form model of harness.oracle.compare.tolerance.
    bound: np.ndarray | None = None
    stages: tuple = ()       # a program's intermediates (name, op, dtype, value, err), in program order
    # The rounded input as statistics rows (R, row_len), float64, for the comparator's float32 witnesses
    # (harness.oracle.witness_error); None where no statistics are accumulated (batch_norm eval, programs).
    stats_rows: np.ndarray | None = None
    centered: bool = True    # the statistics subtract a mean (False for rms_norm)
    eps: float = 0.0
    # A program's witnesses (harness.program.witness_run), run on demand: () -> the output of each correct
    # implementation the comparator measures on the case's rows; () where none can run the program.
    witness_outputs: Callable[[], tuple[np.ndarray, ...]] | None = None
    # A program of several outputs (`return y, r`, a module whose forward returns a tuple): one Reference per
    # output, in order, each with its own value, bound and witnesses; the fields above are the first output's.
    outputs: tuple["Reference", ...] = ()
    names: tuple[str, ...] = ()  # the outputs' names (harness.program.ir.output_names), with `outputs`
    # A gradient (a `"grad": true` case's output): judged by the reference, its bound and its witnesses alone,
    # never by eager, which is a path like the others for gradients (harness.oracle.compare.score).
    gradient: bool = False
    # The output is computed in float32 and rounded once into its narrower dtype (a lifted backward whose only
    # narrower stages are its gradients' own casts, harness.engine.gradients): correct implementations then
    # differ beyond the running bound by that one correctly rounded cast alone (compare.out_ulps).
    rounded_once: bool = False

    @property
    def each(self) -> tuple["Reference", ...]:
        """One Reference per output: itself for one output."""
        return self.outputs or (self,)

    @property
    def output_names(self) -> tuple[str, ...]:
        """Each output's name: its program's (or its position), "0" for a case of one output."""
        return self.names or ("0",)


def expected_dtypes(spec: CaseSpec) -> tuple[str, str, str]:
    """(output dtype, rounding dtype, statistics dtype) of a spec."""
    x, w = spec.dtype, spec.weight_dtype
    has_w = spec.affine != "none"
    stat = "float32"
    if spec.style == "module" or spec.style in ("upcast", "gemma"):
        out = x
        rounding = x
    elif spec.style == "manual":
        out = promote(x, w) if has_w else x
        rounding = x
        stat = narrowest(x, "float32")
    elif spec.style in ("qwen", "llama"):
        out = promote(x, w) if has_w else x
        rounding = x
    elif spec.style == "t5":
        if has_w and w in ("float16", "bfloat16"):
            out = w
        else:
            out = promote(x, "float32")
        rounding = out
    else:  # pragma: no cover - the spec validated the style
        raise ValueError(spec.style)
    return out, narrowest(rounding, out), stat


def _broadcast_channel(v: np.ndarray, shape: tuple[int, ...], axis: int) -> np.ndarray:
    view = [1] * len(shape)
    view[axis] = v.size
    return np.broadcast_to(v.reshape(view), shape)


def program_reference(spec: CaseSpec, inputs: Inputs) -> Reference:
    """The FP64 interpretation of a program case, with its running error bound, intermediates and witnesses."""
    case, program = program_case(spec), spec.parsed_program
    arrays = {**inputs.arrays, **inputs.params}
    return evaluation_reference(evaluate(program, case, arrays),
                                witnesses=program_witnesses(spec.case_id, program, case, arrays))


def evaluation_reference(ev, witnesses: Callable[[], tuple[np.ndarray, ...]] | None = None) -> Reference:
    """The Reference of a program's FP64 evaluation (harness.program.evaluate): a program case's, or a module
    case's lifted program's. `witnesses` is the comparator's hook on the program's witnesses
    (harness.oracle.witness_error.program_witnesses(key, program, case, arrays)); without it a compiled path is
    held to the bound and eager alone."""
    if ev.outputs:  # several outputs: each its own reference, its witnesses' outputs the matching ones
        each = tuple(evaluation_reference(e, None if witnesses is None else _output_of(witnesses, k))
                     for k, e in enumerate(ev.outputs))
        return replace(each[0], outputs=each, names=ev.names)
    out = np.ascontiguousarray(np.asarray(ev.out, dtype=np.float64))
    zeros = np.zeros_like(out)
    return Reference(
        out=out, rows=np.ascontiguousarray(ev.rows), z=zeros, kappa=zeros, weight=zeros, bias=zeros,
        row_len=int(ev.row_len), out_dtype=ev.out_dtype, rounding_dtype=ev.out_dtype, stat_dtype="float32",
        bound=np.ascontiguousarray(np.asarray(ev.bound, dtype=np.float64)), stages=tuple(ev.stages),
        witness_outputs=witnesses,
    )


def by_position(ref: Reference) -> Reference:
    """`ref` with its outputs named by their position ("0", "1", ...): a module case's, whose forward returns a
    tuple (the names its lifted program gives them mean nothing to the class's author)."""
    return replace(ref, names=tuple(str(k) for k in range(len(ref.outputs)))) if ref.outputs else ref


def _output_of(witnesses: Callable[[], tuple], k: int) -> Callable[[], tuple[np.ndarray, ...]]:
    """The witnesses of output `k` of a program of several outputs (each witness gives a tuple of them)."""
    return lambda: tuple(w[k] for w in witnesses())


def reference(spec: CaseSpec, inputs: Inputs) -> Reference:
    """The FP64 reference output of `spec` on `inputs`, with its error-model terms."""
    if spec.program is not None:
        return program_reference(spec, inputs)
    x = inputs.x.astype(np.float64)
    p = {k: v.astype(np.float64) for k, v in inputs.params.items()}
    shape = x.shape
    eps = spec.eps

    if spec.pattern in ("layer_norm", "rms_norm"):
        axis = len(shape) - 1
        X = x.reshape(-1, shape[-1])
        mean = X.mean(1, keepdims=True) if spec.pattern == "layer_norm" else np.zeros((X.shape[0], 1))
        var = ((X - mean) ** 2).mean(1, keepdims=True)
        s = np.sqrt(var + eps)
        z = ((X - mean) / s).reshape(shape)
        kappa = np.broadcast_to(np.sqrt((X**2).mean(1, keepdims=True)) / s, X.shape).reshape(shape)
        rows = np.broadcast_to(np.arange(X.shape[0])[:, None], X.shape).reshape(shape)
        row_len = shape[-1]
        stats_rows = X
    elif spec.pattern in ("group_norm", "instance_norm"):
        axis = 1
        groups = spec.groups if spec.pattern == "group_norm" else shape[1]
        X = x.reshape(shape[0] * groups, -1)
        mean = X.mean(1, keepdims=True)
        var = ((X - mean) ** 2).mean(1, keepdims=True)
        s = np.sqrt(var + eps)
        z = ((X - mean) / s).reshape(shape)
        kappa = np.broadcast_to(np.sqrt((X**2).mean(1, keepdims=True)) / s, X.shape).reshape(shape)
        rows = np.broadcast_to(np.arange(X.shape[0])[:, None], X.shape).reshape(shape)
        row_len = X.shape[1]
        stats_rows = X
    elif spec.pattern == "batch_norm":
        axis = 1
        rm = _broadcast_channel(p["running_mean"], shape, 1)
        s = np.sqrt(_broadcast_channel(p["running_var"], shape, 1) + eps)
        z = (x - rm) / s
        moved = np.moveaxis(x, 1, 0).reshape(shape[1], -1)
        k = np.sqrt((moved**2).mean(1)) / np.sqrt(p["running_var"] + eps)
        kappa = _broadcast_channel(k, shape, 1)
        rows = _broadcast_channel(np.arange(shape[1]), shape, 1)
        row_len = 1  # eval mode: no statistics are accumulated
        stats_rows = None
    else:  # pragma: no cover
        raise ValueError(spec.pattern)

    channels = shape[axis]
    w = p.get("weight", np.ones(channels))
    if spec.style == "gemma" and "weight" in p:
        w = 1.0 + w
    b = p.get("bias", np.zeros(channels))
    weight = _broadcast_channel(w, shape, axis)
    bias = _broadcast_channel(b, shape, axis)
    out = z * weight + bias

    out_dtype, rounding, stat = expected_dtypes(spec)
    return Reference(
        out=np.ascontiguousarray(out), rows=np.ascontiguousarray(rows), z=np.ascontiguousarray(z),
        kappa=np.ascontiguousarray(kappa), weight=np.ascontiguousarray(weight),
        bias=np.ascontiguousarray(bias), row_len=int(row_len), out_dtype=out_dtype,
        rounding_dtype=rounding, stat_dtype=stat,
        stats_rows=None if stats_rows is None else np.ascontiguousarray(stats_rows),
        centered=spec.pattern != "rms_norm", eps=float(eps),
    )
