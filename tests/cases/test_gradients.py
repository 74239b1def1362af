"""The gradients suite: the backward of every catalog pattern, dtype and cast style on many and long rows, offsets
and outliers, and of the context suite's neighbourhoods whose backward the language holds."""
from cases import gradients, neighbours
from cases.suites import suite, suite_notes
from harness.spec import CASTS, PATTERNS


def test_every_case_asks_for_gradients_and_every_pattern_dtype_and_cast_style_is_there():
    specs = suite("gradients")
    assert specs and all(s.grad for s in specs)
    catalog = [s for s in specs if s.program is None and not s.is_module]
    assert {(s.pattern, s.dtype) for s in catalog} == {(p, d) for p in PATTERNS for d in gradients.DTYPES}
    assert {s.cast for s in catalog} == set(CASTS) | {None}
    assert {s.input_dict["kind"] for s in catalog} == {"normal", "offset", "outlier"}
    rows = lambda s: s.shape[0] if s.pattern in ("layer_norm", "rms_norm", "batch_norm") else None  # noqa: E731
    assert max(rows(s) or 0 for s in catalog) >= 4096  # the weight gradients sum over thousands of rows
    long_rows = {s.shape[-1] for s in catalog if s.pattern in ("layer_norm", "rms_norm")}
    assert max(long_rows) == 16384 and min(n for n in long_rows if n > 64) >= 4096
    # each structure carries its three inputs: a compile a path serves them all
    assert len(catalog) == 3 * len({s.structure_key() for s in catalog})


def test_the_context_part_leaves_out_only_the_neighbourhoods_whose_backward_the_language_lacks():
    names = {nb.name for nb, _ in neighbours.suite_pairs(neighbours.active())}
    assert set(gradients.NO_BACKWARD) <= names
    context = [s for s in suite("gradients") if s.program is not None and not s.is_module]
    assert len(context) == len(names - set(gradients.NO_BACKWARD))  # each around its first suite norm
    assert suite_notes("gradients") == gradients.notes() and len(gradients.notes()) == len(gradients.NO_BACKWARD)
