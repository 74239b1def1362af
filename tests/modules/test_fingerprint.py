"""The code a module class's graph comes from: its own file, and the user's helpers it reaches, never torch's."""
import textwrap

from harness.modules.fingerprint import _distribution_versions, code_digest, source_files


def test_a_class_is_its_file_and_the_helpers_it_calls_through_their_globals(tmp_path, monkeypatch):
    (tmp_path / "helpers_mod.py").write_text("def scale(h):\n    return h * 2.0\n")
    (tmp_path / "norm_mod.py").write_text(textwrap.dedent('''
        import torch
        import helpers_mod
        from torch import nn

        class Norm(nn.Module):
            def forward(self, x):
                return helpers_mod.scale(torch.nn.functional.rms_norm(x, x.shape[-1:]))
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    import norm_mod

    files = source_files(norm_mod.Norm)
    assert [f.rsplit("/", 1)[1] for f in files] == ["helpers_mod.py", "norm_mod.py"]  # torch's own files are not
    digest = code_digest(norm_mod.Norm)
    assert len(digest) == 64 and code_digest(norm_mod.Norm) == digest


def test_installed_code_carries_its_distribution_version():
    import importlib.metadata

    import torch
    import user_norms

    assert _distribution_versions(source_files(user_norms.LlamaRMSNorm)) == {}  # the user's code: its files alone
    assert _distribution_versions([torch.nn.functional.__file__]) == {"torch": importlib.metadata.version("torch")}
