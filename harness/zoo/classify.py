"""Which classes of the corpus are norms, and which are blocks named after one (set aside, with the rule).

A class is looked at when its name contains "Norm" or it derives from a torch norm or a norm class
of the corpus. It is a norm when it passes every rule below, in order; the first rule it fails is
the one the listing names:

* `name`: its name ends in a norm's name (NORM_NAME), or it derives from a norm;
* `base`: it is an nn.Module through torch classes only (not a library layer, model or output);
* `block`: what it builds holds no block: no dropout, embedding, attention, recurrent layer, nor a
  class of the corpus that is not itself a norm (an MLP, an attention, an encoder layer);
* `no-norm`: its forward computes a normalization (a norm function, a reduction such as `var` or
  `norm`, `rsqrt`/`sqrt`, a torch norm's forward, or a norm it holds).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from harness.zoo.classes import TORCH_NORMS, ClassRef, candidates, ref_of, torch_class
from harness.zoo.corpus import Corpus
from harness.zoo.methods import built_classes, call_names, forward_pieces, init_pieces, self_attrs_read

# A norm's name, decided from transformers 5.23's 374 classes with "Norm" in their name: it ends in
# "Norm" (LayerNorm, RMSNorm, RmsNorm, GroupNorm, BatchNorm, L2Norm, QKNorm, TimestepNorm, ...),
# optionally with one of the qualifiers the corpus uses (Norm2d, NormGated, LayerNorm1P,
# LayerNormPerHead, AdaLayerNormZero, AdaLayerNormZero_Final).
NORM_QUALIFIERS = ("1d", "2d", "3d", "1P", "Gated", "PerHead", "Zero", "Zero_Final")
NORM_NAME = re.compile(r"Norm(?:" + "|".join(NORM_QUALIFIERS) + r")?$")

# Callees that compute (part of) a normalization.
NORM_CALLS = frozenset({
    "layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "local_response_norm",
    "normalize", "norm", "vector_norm", "rsqrt", "sqrt", "var", "std", "var_mean", "std_mean", "mean",
})
# torch classes that make their holder a block rather than a norm (by name prefix).
TORCH_BLOCKS = ("Dropout", "AlphaDropout", "FeatureAlphaDropout", "Embedding", "MultiheadAttention",
                "LSTM", "GRU", "RNN", "Transformer")

RULES = {
    "name": "the name does not end in a norm's name and it derives from no norm",
    "base": "not an nn.Module through torch classes only (a library layer, model or output base)",
    "block": "builds a block (dropout, embedding, attention, or a library class that is not a norm)",
    "no-norm": "its forward computes no normalization",
}


@dataclass(frozen=True)
class Classification:
    """A class looked at: a norm (rule None), or the first rule of RULES it fails and why."""
    ref: ClassRef
    rule: str | None  # None: a norm; else the first rule of RULES it fails
    detail: str = ""

    @property
    def is_norm(self) -> bool:
        return self.rule is None


class Classifier:
    """Classifies classes of one corpus, remembering each class's classification (a norm may hold other norms)."""

    def __init__(self, corpus: Corpus):
        self.corpus = corpus
        self._memo: dict[str, Classification] = {}
        self._busy: set[str] = set()

    def considered(self, ref: ClassRef) -> bool:
        return "Norm" in ref.name or ref.torch_norm is not None or self._derives_from_norm(ref)

    def _derives_from_norm(self, ref: ClassRef) -> bool:
        return any(self.is_norm_class(b) for b in ref.base_refs)

    def is_norm_class(self, ref: ClassRef) -> bool:
        return self.classification(ref).is_norm

    def classification(self, ref: ClassRef) -> Classification:
        key = ref.target
        if key in self._memo:
            return self._memo[key]
        if key in self._busy:  # a cycle through a class holding itself: not a norm on this path
            return Classification(ref, "block", "builds itself")
        self._busy.add(key)
        try:
            v = self._classify(ref)
        finally:
            self._busy.discard(key)
        self._memo[key] = v
        return v

    def _classify(self, ref: ClassRef) -> Classification:
        derives = ref.torch_norm is not None or self._derives_from_norm(ref)
        if not NORM_NAME.search(ref.name) and not derives:
            return Classification(ref, "name", "")
        if not ref.is_module:
            others = [b.name.rpartition(".")[2] for b in ref.outer_bases if b.kind != "torch"]
            return Classification(ref, "base", "subclasses " + ", ".join(others))
        blocks = self._blocks(ref)
        if blocks:
            return Classification(ref, "block", "builds " + ", ".join(blocks))
        if not self._computes_norm(ref):
            return Classification(ref, "no-norm", "")
        return Classification(ref, None)

    def _blocks(self, ref: ClassRef) -> list[str]:
        out = []
        for b in built_classes(init_pieces(ref)):
            name = b.dotted.rpartition(".")[2]
            t = torch_class(b.dotted)
            if t:
                if name.startswith(TORCH_BLOCKS):
                    out.append(name)
                continue
            lib = ref_of(self.corpus, b.dotted)
            if lib is not None and lib.target != ref.target and lib.is_module and not self.is_norm_class(lib):
                out.append(name)
        return sorted(set(out))

    def norm_attrs(self, ref: ClassRef) -> set[str]:
        """The `self.X` the constructor sets to a norm (a torch norm, a norm of the corpus, a list of them)."""
        out = set()
        for b in built_classes(init_pieces(ref)):
            if b.attr is None:
                continue
            t = torch_class(b.dotted)
            if t and t.rpartition(".")[2] in TORCH_NORMS:
                out.add(b.attr)
            lib = ref_of(self.corpus, b.dotted)
            if lib is not None and lib.target != ref.target and self.is_norm_class(lib):
                out.add(b.attr)
        return out

    def _computes_norm(self, ref: ClassRef) -> bool:
        fwd = forward_pieces(ref)
        if not fwd:  # forward inherited from torch (or a base outside the corpus)
            return ref.torch_norm is not None
        if call_names(fwd) & NORM_CALLS:
            return True
        if ref.torch_norm and "forward" in call_names(fwd) and _calls_super_forward(fwd):
            return True
        return bool(self_attrs_read(fwd) & self.norm_attrs(ref))


def _calls_super_forward(pieces) -> bool:
    """`super().forward(...)` or `nn.LayerNorm.forward(self, ...)`: the torch norm's own forward runs."""
    for p in pieces:
        for node in ast.walk(p.node):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "forward"):
                continue
            owner = node.func.value
            if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
                return True
            if isinstance(owner, (ast.Attribute, ast.Name)):
                t = torch_class(p.module.resolve(ast.unparse(owner)))
                if t and t.rpartition(".")[2] in TORCH_NORMS:
                    return True
    return False


@dataclass(frozen=True)
class Discovery:
    norms: list[ClassRef]
    set_aside: list[Classification]  # classes looked at and not norms, with their rule
    classifier: Classifier


def discover(corpus: Corpus) -> Discovery:
    """Every norm class of the corpus, and every class looked at and set aside (each with its rule)."""
    clf = Classifier(corpus)
    norms, aside = [], []
    for ref in candidates(corpus):
        if not clf.considered(ref):
            continue
        v = clf.classification(ref)
        (norms if v.is_norm else aside).append(ref if v.is_norm else v)
    return Discovery(norms, aside, clf)
