"""What a class runs: constructor chain, forward, helpers, module functions."""
from harness.zoo import corpus
from harness.zoo.classes import ref_of
from harness.zoo.methods import built_classes, init_pieces, reached


def test_reached_follows_self_super_and_module_functions(tmp_path):
    pkg = tmp_path / "lib" / "models" / "m"
    pkg.mkdir(parents=True)
    for folder in (pkg, pkg.parent, pkg.parent.parent):
        (folder / "__init__.py").write_text("")
    (pkg / "modeling_m.py").write_text(
        "import torch\nfrom torch import nn\n\n\ndef _rms(x, eps):\n    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)\n\n\n"
        "class BaseNorm(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n        self.w = nn.Parameter(torch.ones(n))\n\n"
        "    def _norm(self, x):\n        return _rms(x, 1e-6)\n\n    def forward(self, x):\n        return self.w * self._norm(x)\n\n\n"
        "class ChildNorm(BaseNorm):\n    def forward(self, x):\n        return super().forward(x.float())\n\n    def unused(self):\n        pass\n")
    ref = ref_of(corpus.load(root=str(pkg.parent)), "lib.models.m.modeling_m.ChildNorm")
    labels = sorted(p.label for p in reached(ref))
    assert labels == ["BaseNorm.__init__", "BaseNorm._norm", "BaseNorm.forward", "ChildNorm.forward", "lib.models.m.modeling_m._rms"]
    assert [b.dotted for b in built_classes(init_pieces(ref))] == ["torch.nn.Parameter"]
