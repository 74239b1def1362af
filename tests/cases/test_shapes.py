"""The shapes suite: every catalog pattern and dtype compiled once with symbolic dims, run at boundary sizes."""
import importlib.util
import math
from collections import defaultdict

from cases import shapes
from cases.suites import suite
from harness.spec import PATTERNS

MAX_ELEMENTS = 16 * 2**20  # the suite's limit per case (its memory and time)


def structures() -> dict[str, list]:
    out = defaultdict(list)
    for spec in suite("shapes"):
        out[spec.structure_key()].append(spec)
    return out


def test_every_catalog_pattern_and_dtype_has_a_symbolic_structure_and_every_case_is_symbolic():
    specs = suite("shapes")
    assert all(s.dynamic for s in specs)
    found = {(s.pattern, s.dtype) for s in specs if s.program is None}
    assert found == {(p, d) for p in PATTERNS for d in shapes.DTYPES}
    assert max(math.prod(s.shape) for s in specs) <= MAX_ELEMENTS


def test_each_structure_is_one_compile_for_many_sizes_and_none_compiles_at_a_symbolic_one():
    for key, specs in structures().items():
        assert len(specs) >= 3, key  # one compile, several sizes
        assert len({tuple(s.shape) for s in specs}) == len(specs)
        first = specs[0]  # the case whose input the engine compiles with
        assert all(first.shape[d] > 1 for d in first.dynamic), first.to_dict()


def test_reduction_lengths_reach_every_boundary_through_the_program_twins_and_instance_norm():
    lengths = defaultdict(set)
    for specs in structures().values():
        s = specs[0]
        if s.dynamic == (len(s.shape) - 1,) and (s.program is not None or s.pattern == "instance_norm"):
            if s.program is not None and s.shape[-1] != 64:  # a twin, not a context case
                lengths[(s.pattern, s.dtype)] |= {t.shape[-1] for t in specs}
            elif s.pattern == "instance_norm":
                lengths[(s.pattern, s.dtype)] |= {t.shape[-1] for t in specs}
    assert set(lengths) == {(p, d) for p in ("layer_norm", "rms_norm", "instance_norm") for d in shapes.DTYPES}
    for found in lengths.values():
        assert {2048, 2049, 4095, 4096, 4097, 65504, 65520, 65536, 70000, 3, 7, 13} <= found


def test_the_context_neighbourhoods_join_with_their_tokens_symbolic_where_the_program_holds_them():
    context = [s for s in suite("shapes") if s.program is not None and s.shape[-1] == 64]
    assert context and all(s.dynamic == (1,) and s.dtype == "float16" for s in context)
    assert {s.shape[1] for s in context} == set(shapes.CONTEXT_SEQUENCES)
    assert len({s.structure_key() for s in context}) == len(context) // len(shapes.CONTEXT_SEQUENCES) == 3


def test_module_and_zoo_cases_join_with_their_sequence_symbolic():
    """torch's nn.RMSNorm (and, with the zoo extra, the transformers norms most models share, as the zoo builds
    them) over [B, S, H] in float16: S (dim 1) symbolic, one structure each at every MODULE_SEQUENCES size."""
    modules = [s for s in suite("shapes") if s.is_module]
    assert modules and all(s.dynamic == (1,) and s.dtype == "float16" and len(s.shape) == 3 for s in modules)
    by_class = defaultdict(list)
    for s in modules:
        by_class[s.cls].append(s)
    assert "torch.nn:RMSNorm" in by_class
    for cls, specs in by_class.items():
        assert len({s.structure_key() for s in specs}) == 1, cls
        assert sorted(s.shape[1] for s in specs) == sorted(shapes.MODULE_SEQUENCES), cls
    if importlib.util.find_spec("transformers") is not None:
        assert "transformers.models.llama.modeling_llama:LlamaRMSNorm" in by_class
