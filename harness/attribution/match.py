"""Which compiled intermediate computes which program stage, and how far it is from its bound.

This module needs NumPy only: `normdiff repro` copies its source into the
standalone script (the op table's names it reads pasted as literals), so the
script's stage table and the record's attribution come from one rule.

The rule (docs/attribution.md, "Matching"):
1. Ops are compared by a canonical name (`canonical`: "relax.variance",
   "aten.var.correction" -> "var"; casts -> "cast"; layout-only ops such as
   reshape or permute are not computations and are dropped) and by class
   (reduction, elementwise, cast, whole norm).
2. A stage and an intermediate can pair only when their shapes agree once
   size-1 dims are dropped ((1, 1) and () are both one statistic per row).
   The pair's weight is 3 for the same canonical op, 2 for the same class
   with a value within MAX_REL of the stage's FP64 value (relative to the
   stage's largest magnitude), 1 for a whole norm op standing in for an
   elementwise stage within MAX_REL (a fused rms_norm is the program's
   `h * rsqrt(...)`), plus up to 0.5 for closeness. A far-off value still
   pairs on the same op: a variance that lost half its value is still the
   variance.
3. The program's last stage is the compiled graph's output (anchored; a
   program of several outputs anchors each output's stage to the value the
   graph returns for it); the others are aligned in order, as a
   longest-common-subsequence with these weights: the compiled graph computes stages in program order (importers
   and decompositions translate ops in order), and among orderings the
   heaviest total wins. Unpaired stages were not computed as such.
"""
import numpy as np

# The op table's names: a repro script gets these four as literals in place of this import (stage_table.py).
from harness.program.ops import CANONICAL as _CANONICAL, CLASSES as _CLASS, LAYOUT as _LAYOUT, NORM_PARTS as _PARTS

MAX_REL = 0.5  # a same-class pair must be within 50% of the stage's magnitude

def canonical(op):
    """The canonical op of a compiled op name or a program stage op; None for a layout-only op.

    "relax.nn.layer_norm" -> "layer_norm", "aten.mean.dim" -> "mean",
    "aten.native_layer_norm.default#rsqrt" (a tuple item named by its reader)
    -> "rsqrt", "layer_norm.variance" (a norm's part) -> "var". Unknown ops
    give "other:<name>", which pairs with nothing.
    """
    if "#" in op:
        return canonical(op.rsplit("#", 1)[1])
    kind, _, part = op.partition(".")
    if kind in ("layer_norm", "rms_norm", "group_norm") and part in _PARTS:
        return _PARTS[part]
    parts = op.split(".")
    for name in (parts[-1], parts[-2] if len(parts) > 1 else "", parts[1] if len(parts) > 2 else ""):
        if name in _CANONICAL:
            return _CANONICAL[name]
        if name in _LAYOUT:
            return None
    return "other:" + op


def op_class(op):
    return _CLASS.get(op, "other" if op.startswith("other:") else "elementwise")


def shape_key(shape):
    return tuple(int(n) for n in shape if int(n) != 1)


def distance(ref, value):
    """max |value - ref| / max |ref| over the elements where ref is finite (inf if value is not finite there)."""
    ref = np.asarray(ref, dtype=np.float64).reshape(-1)
    val = np.asarray(value).astype(np.float64).reshape(-1)
    finite = np.isfinite(ref)
    if not finite.any():
        return 0.0
    if not np.isfinite(val[finite]).all():
        return np.inf
    scale = float(np.abs(ref[finite]).max())
    diff = float(np.abs(val[finite] - ref[finite]).max())
    if diff == 0.0:
        return 0.0
    return diff / scale if scale > 0 else np.inf


def pair_weight(stage_op, stage_value, inter_op, inter_value):
    """The weight of pairing a stage (canonical op, FP64 value) with an intermediate; None: they cannot pair."""
    if shape_key(np.shape(stage_value)) != shape_key(np.shape(inter_value)):
        return None
    dist = distance(stage_value, inter_value)
    bonus = 0.5 * (1.0 - min(dist, 1.0))
    s_class, i_class = op_class(stage_op), op_class(inter_op)
    if stage_op == inter_op and s_class != "other":
        return 3.0 + bonus
    if dist > MAX_REL:
        return None
    if s_class == i_class and s_class not in ("other", "cast"):
        return 2.0 + bonus
    if i_class == "norm" and s_class in ("elementwise", "cast"):
        return 1.0 + bonus
    return None


def align(stages, intermediates, output, anchors=None):
    """{stage index: intermediate index}: the last stage anchored to `output`, the rest aligned in order.

    `stages` and `intermediates` are lists of (canonical op, value) in program
    and execution order; `output` is the index of the intermediate the
    compiled graph returns (None if it is not among them). `anchors`
    ({stage index: intermediate index}), when given, are the anchored pairs
    instead: a program of several outputs, each output's stage to the value
    the graph returns for it.
    """
    if anchors is None:
        anchors = {len(stages) - 1: output} if output is not None and stages else {}
    pairs = dict(anchors)
    free = [i for i in range(len(stages)) if i not in anchors]
    taken = set(anchors.values())
    rest = [j for j in range(len(intermediates)) if j not in taken]
    n, m = len(free), len(rest)
    weight = [[pair_weight(*stages[free[i]], *intermediates[rest[j]]) for j in range(m)] for i in range(n)]
    best = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            options = [best[i + 1][j], best[i][j + 1]]
            if weight[i][j] is not None:
                options.append(weight[i][j] + best[i + 1][j + 1])
            best[i][j] = max(options)
    i = j = 0
    while i < n and j < m:
        w = weight[i][j]
        if w is not None and best[i][j] == w + best[i + 1][j + 1]:
            pairs[free[i]] = rest[j]
            i, j = i + 1, j + 1
        elif best[i][j] == best[i + 1][j]:
            i += 1
        else:
            j += 1
    return pairs


def err_over_bound(ref, err, value):
    """max |value - ref| / err where ref is finite: 0 where they agree, inf where value is not finite or err is 0."""
    ref = np.asarray(ref, dtype=np.float64)
    err = np.broadcast_to(np.asarray(err, dtype=np.float64), ref.shape).reshape(-1)
    ref = ref.reshape(-1)
    val = np.asarray(value).astype(np.float64).reshape(-1)
    finite = np.isfinite(ref)
    if not finite.any():
        return 0.0
    ref, err, val = ref[finite], err[finite], val[finite]
    if not np.isfinite(val).all():
        return np.inf
    diff = np.abs(val - ref)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(diff == 0, 0.0, diff / err)
    return float(np.nanmax(np.where(np.isnan(ratio), np.inf, ratio)))
