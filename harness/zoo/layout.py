"""The input layout a norm's forward expects, read from its source: last-dim, channels-first, per-head.

The rules, first match wins (each names what in the source decides it):

* a size argument given as a shape (heads, size): [batch, seq, heads, size];
* `feature_dims` argument: [batch, time, *feature_dims, channels] (a norm over time-stepped features);
* a head-count argument (`num_heads`): [batch, heads, seq, size], the heads split on dim 1;
* `[None, None, :, None]` on a parameter: [batch, seq, heads, size] (a per-head scale on dim 2);
* a `permute` whose last axis is 1, or a parameter broadcast as `[:, None, None]`,
  `view/reshape(1, -1, 1[, 1])`, `[None, :, None, None]`: channels first, of that rank;
* a torch channels-first norm as base (GroupNorm, BatchNorm, InstanceNorm), or held by a forward that
  neither permutes nor transposes: channels first (rank 3 for the 1d ones, else 4);
* otherwise the norm is over the last dim: [batch, seq, size].
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from harness.zoo.classes import ClassRef
from harness.zoo.methods import built_classes, init_pieces, reached

SIZE = 64
BATCH, SEQ, SPATIAL, HEADS = 2, 8, 4, 4
CHANNELS_FIRST = ("GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm",
                  "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm")


@dataclass(frozen=True)
class Layout:
    name: str
    shape: tuple[int, ...]


def last_dim() -> Layout:
    return Layout("last-dim", (BATCH, SEQ, SIZE))


def channels_first(rank: int) -> Layout:
    trailing = (SEQ,) if rank == 3 else (SPATIAL,) * (rank - 2)
    return Layout(f"channels-first rank {rank}", (BATCH, SIZE, *trailing))


def _ints(args) -> list[int] | None:
    out = []
    for a in args:
        if isinstance(a, ast.Constant) and isinstance(a.value, int):
            out.append(a.value)
        elif isinstance(a, ast.UnaryOp) and isinstance(a.op, ast.USub) and isinstance(a.operand, ast.Constant):
            out.append(-a.operand.value)
        else:
            return None
    return out


def _index_pattern(node: ast.Subscript) -> str | None:
    """`[:, None, None]` -> ':NN'; `[None, None, :, None]` -> 'NN:N' (None: not such an index)."""
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    out = ""
    for e in elts:
        if isinstance(e, ast.Constant) and e.value is None:
            out += "N"
        elif isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None:
            out += ":"
        else:
            return None
    return out if "N" in out and ":" in out else None


def _forward_facts(ref: ClassRef) -> dict:
    facts = {"permute_rank": None, "broadcast_rank": None, "heads_dim2": False, "transposes": False}
    for p in reached(ref, roots=("forward",)):
        for node in ast.walk(p.node):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                name, args = node.func.attr, node.args
                ints = _ints(args)
                if name == "permute" and ints and ints[-1] == 1 and facts["permute_rank"] is None:
                    facts["permute_rank"] = len(ints)
                elif name == "permute" or name == "transpose":
                    facts["transposes"] = True
                elif name in ("view", "reshape") and ints and len(ints) >= 3 and ints[0] == 1 and ints[1] == -1 \
                        and all(i == 1 for i in ints[2:]):
                    facts["broadcast_rank"] = facts["broadcast_rank"] or len(ints)
            elif isinstance(node, ast.Subscript):
                pat = _index_pattern(node)
                if pat in (":NN", "N:NN"):
                    facts["broadcast_rank"] = facts["broadcast_rank"] or 4
                elif pat == "NN:N":
                    facts["heads_dim2"] = True
    return facts


def _rank_of(norm: str) -> int:
    return 3 if norm.endswith("1d") else 5 if norm.endswith("3d") else 4


def layout_of(ref: ClassRef, init: dict) -> Layout:
    """The layout (and a small shape) of the norm's input, by the rules of this module's docstring."""
    shaped = [v for v in init.values() if isinstance(v, list) and len(v) == 2 and v[-1] == SIZE]
    if shaped:
        return Layout("heads x size", (BATCH, SEQ, *shaped[0]))
    if "feature_dims" in init:
        return Layout("time x features x channels", (BATCH, SEQ, *init["feature_dims"], SIZE))
    if any(k in init for k in ("num_heads", "num_attention_heads", "n_heads", "heads", "n_head")):
        return Layout("heads on dim 1", (BATCH, HEADS, SEQ, SIZE))
    facts = _forward_facts(ref)
    if facts["heads_dim2"]:
        return Layout("heads on dim 2", (BATCH, SEQ, HEADS, SIZE))
    if facts["permute_rank"]:
        return channels_first(facts["permute_rank"])
    if facts["broadcast_rank"]:
        return channels_first(facts["broadcast_rank"])
    base = (ref.torch_norm or "").rpartition(".")[2]
    if base in CHANNELS_FIRST:
        return channels_first(_rank_of(base))
    if not facts["transposes"]:
        for b in built_classes(init_pieces(ref)):
            last = b.dotted.rpartition(".")[2]
            if b.dotted.startswith("torch.nn.") and last in CHANNELS_FIRST:
                return channels_first(_rank_of(last))
    return last_dim()
