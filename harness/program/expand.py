"""A program's FP64 stages with every F.* norm opened up into the stages an implementation computes.

`evaluate` keeps an F.layer_norm / F.rms_norm / F.group_norm as one stage
(its output), which is all the reference needs. Attribution needs more: a
compiled norm is a chain (mean, variance, rsqrt, normalize, scale, shift)
and the stage that lost the precision is one link of it. `evaluate_expanded`
evaluates the same program and, before each norm's own stage, emits its
parts, with op "<kind>.<part>":

    layer_norm, group_norm: mean, centered (x - mean), variance, var_eps
        (variance + eps), std (its sqrt), rstd (its rsqrt), normalize
        ((x - mean) * rstd), scale (normalize * weight; only when a bias
        follows, else the norm's own stage is the scale)
    rms_norm: square, mean_square, ms_eps, std, rstd, normalize

Both std and rstd are parts because implementations take either road
(TVM's decomposition divides by the std, torch's kernel multiplies by the
rstd). The parts are in float32, the dtype torch's CPU kernels keep their
statistics and normalized values in (opmath) for every input dtype, and
their bounds are what such a correct implementation is entitled to, by the
rules of bounds.py (the two-pass float32 accumulation of `reduction`, the
closed form of `normalize`). The norm's own stage (the output) is exactly
what `evaluate` gives; nothing else changes.
"""
from __future__ import annotations

import numpy as np

from harness.program import bounds
from harness.core.eps import torch_norm_eps
from harness.program.typecheck import norm_info
from harness.program.interpret import Evaluation, Fp64Walker, evaluate
from harness.program.ir import Program, ProgramCase

STAT_DTYPE = "float32"  # torch's CPU norm kernels: statistics and normalized values in float32


class ExpandingWalker(Fp64Walker):
    """Fp64Walker that emits an F.* norm's parts as stages before the norm's own stage."""

    def norm(self, node, v, normalized_shape, groups, weight, bias, eps):
        types = [None if p is None else self._type(p) for p in (weight, bias)]
        info = norm_info(node, self._type(v), normalized_shape, groups, *types, eps, self.line)
        flags = (self.nonfinite, self.overflow)  # the parts do not change what evaluate reports
        self._parts(node.kind, v, info, weight, bias,
                    torch_norm_eps(node.kind, eps))
        self.nonfinite, self.overflow = flags
        return super().norm(node, v, normalized_shape, groups, weight, bias, eps)

    def _part(self, kind, part, value, err):
        return self._emit(f"{kind}.{part}", value, err, STAT_DTYPE, None)

    def _parts(self, kind, v, info, weight, bias, eps):
        shape, rank = v.value.shape, v.value.ndim
        a, ea, axes = v.value, v.err, info.axes
        if kind == "group_norm":
            a, ea, axes = a.reshape(shape[0], info.groups, -1), ea.reshape(shape[0], info.groups, -1), (2,)
        eps = float(eps)
        with np.errstate(all="ignore"):
            if kind == "rms_norm":
                sq = self._part(kind, "square", *bounds.square(a, ea))
                stat = self._part(kind, "mean_square", *bounds.reduction("mean", sq.value, sq.err, axes, None))
                stat_eps = self._part(kind, "ms_eps", *bounds.add(stat.value, stat.err, eps,
                                                                    bounds.scalar_error(eps, STAT_DTYPE)))
            else:
                mean = self._part(kind, "mean", *bounds.reduction("mean", a, ea, axes, None))
                centered = bounds.add(a, ea, mean.value, mean.err, -1.0)
                self._part(kind, "centered", centered[0].reshape(shape), centered[1].reshape(shape))
                var = self._part(kind, "variance", *bounds.reduction("var", a, ea, axes, 0))
                stat_eps = self._part(kind, "var_eps", *bounds.add(var.value, var.err, eps,
                                                                     bounds.scalar_error(eps, STAT_DTYPE)))
            self._part(kind, "std", *bounds.sqrt(stat_eps.value, stat_eps.err))
            self._part(kind, "rstd", *bounds.rsqrt(stat_eps.value, stat_eps.err))
            z, ez = bounds.normalize(kind, a, ea, axes, eps)
            affine = weight is not None or bias is not None
            if not affine and v.dtype == STAT_DTYPE:
                return  # the norm's own stage is the normalized value, in the same dtype
            zn = self._part(kind, "normalize", z.reshape(shape), ez.reshape(shape))
            if kind != "rms_norm" and weight is not None and bias is not None:
                pshape = (shape[rank - len(info.axes):] if kind != "group_norm"
                          else (shape[1],) + (1,) * (rank - 2))
                wv, we = weight.value.reshape(pshape), weight.err.reshape(pshape)
                self._part(kind, "scale", *bounds.mul(zn.value, zn.err, wv, we))


def evaluate_expanded(program: Program, info: ProgramCase, arrays: dict) -> Evaluation:
    """As harness.program.evaluate (same output, bound and stages), with each norm's parts among the stages."""
    return evaluate(program, info, arrays, keep_stages=True, walker_class=ExpandingWalker)


def is_part(stage) -> bool:
    """Whether a stage is a norm's part (emitted by evaluate_expanded), not a stage of the program itself."""
    return "." in stage.op
