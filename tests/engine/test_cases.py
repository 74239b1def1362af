"""A case made concrete in a worker: its Setup kept for the next paths of its structure, and a module
case's lifted program kept on disk, keyed by the class's code, so a warm run neither exports nor lifts it."""
import shutil
import sys
import textwrap

import numpy as np

from harness.engine.cache import ArtifactCache
from harness.engine.cases import Cases
from harness.spec import CaseSpec

LLAMA = CaseSpec.from_dict({"pattern": "rms_norm", "class": "user_norms:LlamaRMSNorm", "init": {"hidden_size": 16},
                            "dtype": "float16", "shape": [2, 16], "params": {"kind": "normal"}})


def test_a_cases_setup_is_made_once_for_all_its_paths():
    cases = Cases()
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [2, 16]})
    first = cases.setup(spec)
    assert cases.setup(CaseSpec.from_dict(spec.to_dict())) is first  # the same case, for the next path
    assert cases.setup(spec.replace(input={"kind": "uniform", "low": -1.0, "high": 3.0})) is not first


def test_a_kept_lifted_program_restores_the_module_case_without_exporting(tmp_path):
    cold = Cases(ArtifactCache(str(tmp_path))).module_case(LLAMA)
    warm = Cases(ArtifactCache(str(tmp_path))).module_case(LLAMA)  # another worker, another run
    assert cold.exported is not None and warm.exported is None  # restored: nothing exported
    assert warm.resolved == cold.resolved and warm.digest == cold.digest
    a, b = Cases().setup(LLAMA), Cases(ArtifactCache(str(tmp_path))).setup(LLAMA)
    assert a.lift == b.lift and a.lift is not None
    assert np.array_equal(a.ref.out, b.ref.out) and np.array_equal(a.ref.bound, b.ref.bound)


def test_an_edit_to_the_class_is_a_new_key_not_a_stale_lift(tmp_path, monkeypatch):
    """The user edits the forward between runs: the kept lift of the old code is not used."""
    folder = tmp_path / "lib"
    folder.mkdir()
    source = textwrap.dedent('''
        import torch
        from torch import nn

        def scale(h):
            return h * 2.0

        class Twice(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(dim))

            def forward(self, x):
                h = x.float()
                h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
                return scale(self.weight * h.to(x.dtype))
    ''')
    (folder / "edited_norm.py").write_text(source)
    monkeypatch.syspath_prepend(str(folder))
    spec = CaseSpec.from_dict({"pattern": "rms_norm", "class": "edited_norm:Twice", "init": {"dim": 8},
                               "dtype": "float32", "shape": [2, 8]})
    cache = ArtifactCache(str(tmp_path / "cache"))
    before = Cases(cache).module_case(spec)
    (folder / "edited_norm.py").write_text(source.replace("h * 2.0", "h * 3.0"))  # the helper, not the class
    for name in [n for n in sys.modules if n == "edited_norm"]:
        del sys.modules[name]  # a new run imports the edited file
    shutil.rmtree(folder / "__pycache__", ignore_errors=True)
    after = Cases(cache).module_case(spec)
    assert after.exported is not None  # lifted again
    assert "2.0" in before.resolved.source and "3.0" in after.resolved.source


def test_a_gradient_cases_lifted_backward_is_kept_by_structure_once_its_setup_is_made():
    """What a gradient repro script pastes (harness/repro/gradient_script.py): the program's names for the
    inputs, the cotangents and the module's state."""
    spec = CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [2, 8], "grad": True})
    cases = Cases()
    assert cases.lifted_backward(spec) is None
    cases.setup(spec)
    lifted = cases.lifted_backward(spec)
    assert lifted.inputs == ("x", "dy") and set(lifted.params) <= {"weight", "bias"} and "weight" in lifted.params
    assert lifted.source == cases.setup(spec).lift.program


def _sized(raw: dict, n: int) -> CaseSpec:
    return CaseSpec.from_dict({**raw, "shape": [2, n, 16]})


SYMBOLIC_LLAMA = {"class": "user_norms:LlamaRMSNorm", "init": {"hidden_size": 16}, "dtype": "float16",
                  "shape": [2, 13, 16], "dynamic": [1], "dynamic_max": 64, "params": {"kind": "normal"}}


def test_a_symbolic_module_cases_sizes_share_its_lift_each_checked_and_referenced_at_its_own_size():
    """One structure, one export and lift; each size's program case and reference are that size's, equal to
    the static case's of the same size."""
    cases = Cases()
    big, small = _sized(SYMBOLIC_LLAMA, 13), _sized(SYMBOLIC_LLAMA, 7)
    a, b = cases.module_case(big), cases.module_case(small)
    assert b.resolved is a.resolved and b.module is a.module and b.exported is None  # not exported again
    assert (a.case.shape, b.case.shape) == ((2, 13, 16), (2, 7, 16))
    assert cases.module_case(small) is b  # kept for the next paths of this size
    ref = cases.setup(small).ref
    static = Cases().setup(small.static()).ref
    assert ref.out.shape == (2, 7, 16) and np.array_equal(ref.out, static.out)
    assert np.array_equal(ref.bound, static.bound)


def test_a_lifted_program_holding_a_literal_size_is_lifted_again_at_each_size(tmp_path, monkeypatch):
    """A forward that flattens the rows exports a view to the traced sizes: that program does not check at
    another size, so the class is exported and lifted at it."""
    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "flat_norm.py").write_text(textwrap.dedent('''
        import torch
        from torch import nn

        class FlatLayerNorm(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.norm = nn.LayerNorm(dim)

            def forward(self, x):
                rows = x.reshape(-1, x.shape[-1])
                return self.norm(rows).reshape(x.shape)
    '''))
    monkeypatch.syspath_prepend(str(folder))
    raw = {"class": "flat_norm:FlatLayerNorm", "init": {"dim": 16}, "dtype": "float32", "shape": [2, 13, 16],
           "dynamic": [1], "dynamic_max": 64}
    cases = Cases()
    a, b = cases.module_case(_sized(raw, 13)), cases.module_case(_sized(raw, 7))
    assert "26" in a.resolved.source and "14" in b.resolved.source and b.exported is not None
    ref = cases.setup(_sized(raw, 7)).ref
    assert np.array_equal(ref.out, Cases().setup(_sized(raw, 7).static()).ref.out)
