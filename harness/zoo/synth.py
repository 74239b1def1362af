"""A norm implementation as a module spec (docs/contracts.md §8), built small, from its source alone.

Constructor arguments come from name rules (ARG_RULES: sizes 64, group counts 4, head counts 4, a
group size of 16, ...): every required argument gets one, `eps` keeps its default, a `data_format`
defaulting to channels_last is set to channels_first (the branch the class adds to torch's norm).
A `config` argument is the model's own config class with the fields the norm reads set small and
the head counts set so that sizes divide evenly. The input's shape follows the layout the forward
shows (layout.py). Forward arguments after the input that the norm needs (a gate, a conditioning
vector, a second tensor without default) become extra inputs under their own names.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from harness.core.eps import TORCH_NORM_EPS
from harness.zoo.classes import TORCH_NORMS, ClassRef, ref_of
from harness.zoo.configs import NO_DEFAULT, config_of
from harness.zoo.layout import Layout, layout_of
from harness.zoo.methods import built_classes, call_names, init_pieces, reached
from harness.zoo.signature import NOT_LITERAL, forward_params, init_params

SIZE = 64  # the normalized size (hidden size or channels)
GROUPS = 4
HEADS = 4
GROUP_SIZE = SIZE // GROUPS

SIZE_ARGS = {"hidden_size", "dim", "normalized_shape", "num_channels", "num_features", "channels", "size",
             "feat_size", "c_in", "n", "d_model", "embed_dim", "hidden_dim", "in_channels", "out_channels",
             "features", "feature_size", "width", "d", "num_hidden"}
GROUP_ARGS = {"num_groups", "n_groups", "groups"}
HEAD_ARGS = {"num_heads", "num_attention_heads", "n_heads", "heads", "n_head"}
ARG_RULES = {**{n: SIZE for n in SIZE_ARGS}, **{n: GROUPS for n in GROUP_ARGS}, **{n: HEADS for n in HEAD_ARGS},
             "group_size": GROUP_SIZE, "feature_dims": [4]}
# forward arguments that carry a gate (same shape as the input) or a conditioning vector ([batch, size])
GATE_ARGS = {"gate", "gates", "z", "gate_states"}
COND_ARGS = {"emb", "temb", "cond", "condition", "conditioning", "c", "time_emb", "timestep_emb"}

# config fields: sizes read by the norm are set to SIZE, head counts to HEADS
CONFIG_SIZES = {"hidden_size", "d_model", "n_embd", "embed_dim", "hidden_dim", "dim", "width", "input_size",
                "num_channels", "dim_model", "head_dim", "model_dim", "intermediate_size"}
CONFIG_HEADS = {"num_attention_heads", "num_key_value_heads", "num_heads", "n_head", "n_heads",
                "encoder_attention_heads", "decoder_attention_heads"}
CONFIG_GROUPS = {"num_groups", "n_groups"}


BATCH_NORMS = ("BatchNorm", "SyncBatchNorm")
NORM_FUNCTIONS = ("layer_norm", "group_norm", "rms_norm", "batch_norm", "instance_norm")


class SynthError(ValueError):
    """The implementation cannot be written as a spec (one line: why)."""


@dataclass(frozen=True)
class Synth:
    """The spec every dtype and input of one implementation shares, and how it was derived."""

    base: dict  # a module spec without dtype and input
    notes: list = field(default_factory=list)  # how each choice was made (for the listing's detail)


def config_reads(ref: ClassRef, depth: int = 0) -> set[str]:
    """Fields the class reads off `config` (`config.X`, `getattr(config, "X", ...)`), and classes it builds."""
    out = set()
    for p in reached(ref):
        for node in ast.walk(p.node):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "config":
                out.add(node.attr)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                  and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and node.args[0].id == "config"
                  and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
                out.add(node.args[1].value)
    if depth < 4:
        for b in built_classes(init_pieces(ref)):
            inner = ref_of(ref.corpus, b.dotted)
            if inner is not None and inner.target != ref.target:
                out |= config_reads(inner, depth + 1)
    return out


def config_fields(fields: dict, reads: set[str], head_dim_read: bool) -> dict:
    """The overrides of a config: what the norm reads made small, the head counts made to divide."""
    out = {}
    for name in sorted(reads):
        if name in CONFIG_SIZES:
            out[name] = SIZE
        elif name in CONFIG_HEADS:
            out[name] = HEADS
        elif name in CONFIG_GROUPS:
            default = fields.get(name, NO_DEFAULT)
            if not (isinstance(default, int) and default > 0 and SIZE % default == 0):
                out[name] = GROUPS
    # sizes that must stay consistent with the ones set (validators check divisibility by head counts)
    if "hidden_size" in fields:
        out.setdefault("hidden_size", SIZE)
    for name in CONFIG_HEADS & set(fields):
        out.setdefault(name, HEADS)
    if "head_dim" in fields:
        out.setdefault("head_dim", SIZE if head_dim_read else SIZE // HEADS)
    return out


def _pattern(ref: ClassRef) -> str | None:
    """The norm family, when the class says it plainly (a torch norm or norm function); else left to the lift."""
    names = call_names(reached(ref, roots=("forward",)))
    for fn, family in (("rms_norm", "rms_norm"), ("layer_norm", "layer_norm"), ("group_norm", "group_norm"),
                       ("batch_norm", "batch_norm"), ("instance_norm", "instance_norm")):
        if fn in names:
            return family
    if ref.torch_norm:
        family = TORCH_NORMS[ref.torch_norm.rpartition(".")[2]]
        return family if family != "local_response_norm" else None
    for b in built_classes(init_pieces(ref)):
        last = b.dotted.rpartition(".")[2]
        if b.dotted.startswith("torch.nn.") and last in TORCH_NORMS and TORCH_NORMS[last] != "local_response_norm":
            return TORCH_NORMS[last]
    if "RMSNorm" in ref.name or "RmsNorm" in ref.name:
        return "rms_norm"
    return None


def _params_kind(ref: ClassRef) -> str:
    """`normal`, except for a norm holding running statistics (a buffer named running_var, a torch batch
    norm as base or held): a normal draw makes a variance negative and the output NaN."""
    text = " ".join(ast.unparse(p.node) for p in init_pieces(ref))
    torch_classes = [(ref.torch_norm or "")] + [b.dotted for b in built_classes(init_pieces(ref))]
    batch = any(c.startswith("torch.nn.") and c.rpartition(".")[2].startswith(BATCH_NORMS) for c in torch_classes)
    return "ones" if batch or "running_var" in text else "normal"


def _fp32_pinned(ref: ClassRef) -> bool:
    """The forward upcasts the input and hands it, with `self.weight`/`self.bias` uncast, to a norm
    function: the weights are kept in float32 (EsmFold2LayerNorm: "its weight/bias are fp32-pinned")."""
    for p in reached(ref, roots=("forward",)):
        for node in ast.walk(p.node):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in NORM_FUNCTIONS and node.args):
                continue
            first = node.args[0]
            upcast = isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute) and (
                first.func.attr == "float" or (first.func.attr == "to" and "float32" in ast.unparse(first)))
            plain = [a for a in list(node.args[1:]) + [k.value for k in node.keywords]
                     if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id == "self"
                     and a.attr in ("weight", "bias")]
            if upcast and plain:
                return True
    return False


def _shape_arg(ref: ClassRef, name: str) -> bool:
    """The constructor indexes the size argument (`hidden_size[-1]`): it is a shape, not a size."""
    for p in init_pieces(ref):
        for node in ast.walk(p.node):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name:
                return True
    return False


def synthesize(ref: ClassRef) -> Synth:
    """The base spec of an implementation's representative; SynthError when a required argument has no rule."""
    notes: list[str] = []
    init: dict = {}
    for p in init_params(ref):
        if p.name == "config":
            cc, how = config_of(ref)
            if cc is None:
                raise SynthError(f"takes a config and its config class is not found: {how}")
            reads = config_reads(ref)
            fields = config_fields(cc.fields, reads, "head_dim" in reads)
            init["config"] = {"class": cc.target, **fields}
            notes.append(f"config {cc.target.rpartition(':')[2]} ({how})")
        elif p.name in SIZE_ARGS and (p.required or p.default is None) and _shape_arg(ref, p.name):
            init[p.name] = [HEADS, SIZE]
            notes.append(f"{p.name} is a shape (heads, size)")
        elif p.name in ARG_RULES and (p.required or p.default is None):
            init[p.name] = ARG_RULES[p.name]
        elif p.name == "eps" and isinstance(p.default, (int, float)) and not isinstance(p.default, bool):
            init["eps"] = p.default
        elif p.name == "eps" and p.required:
            init["eps"] = TORCH_NORM_EPS
        elif p.name == "data_format" and p.default == "channels_last":
            init["data_format"] = "channels_first"
        elif p.required:
            raise SynthError(f"no rule for the required constructor argument {p.name!r}")
        elif p.default is NOT_LITERAL:
            notes.append(f"{p.name} keeps its default")
    layout: Layout = layout_of(ref, init)
    spec = {"class": ref.target, "init": init, "shape": list(layout.shape), "params": {"kind": _params_kind(ref)},
            "seed": 0}
    pattern = _pattern(ref)
    if pattern:
        spec = {"pattern": pattern, **spec}
    if _fp32_pinned(ref):
        spec["weight_dtype"] = "float32"
        notes.append("weights kept in float32 (the forward upcasts the input, not its weights)")
    inputs = {}
    for p in forward_params(ref):
        if p.name in GATE_ARGS or (p.required and p.name not in COND_ARGS):
            inputs[p.name] = {"kind": "normal"}
        elif p.name in COND_ARGS:
            inputs[p.name] = {"kind": "normal", "shape": [layout.shape[0], SIZE]}
        elif p.required:
            raise SynthError(f"no rule for the required forward argument {p.name!r}")
    if inputs:
        spec["inputs"] = inputs
    notes.append(f"layout {layout.name}")
    return Synth(spec, notes)


def specs_of(base: dict, dtypes, inputs_for) -> list[dict]:
    """The module specs of one implementation: every dtype × every input object of `inputs_for(dtype)`."""
    out = []
    for dtype in dtypes:
        for inp in inputs_for(dtype):
            out.append({**base, "dtype": dtype, "input": dict(inp)})
    return out
