"""`normdiff zoo list`: the listing, its bad usage, and its one line without transformers."""
import subprocess
import sys

import pytest
from helpers import ROOT

# The command line in a fresh interpreter where `import transformers` fails as if it were not
# installed (sys.modules[name] = None is how Python marks a module as absent).
WITHOUT = ("import sys; sys.modules['transformers'] = None; "
           "from harness.commands.main import main; raise SystemExit(main(sys.argv[1:]))")


def _without_transformers(*args):
    return subprocess.run([sys.executable, "-c", WITHOUT, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_without_transformers_it_says_how_to_install_in_one_line():
    r = _without_transformers("zoo", "list")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == ["normdiff: error: the zoo needs transformers: pip install 'normdiff[zoo]'"]


def test_without_transformers_a_folder_of_modeling_files_is_still_listed(tiny_models):
    r = _without_transformers("zoo", "list", "--root", str(tiny_models), "--source-only")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(ln.split()[:3] == ["AlphaRMSNorm", "3", "spec"] for ln in lines)
    assert "    AlphaNormEmbeddings" in lines and "    AlphaEncoderLayerNorm  (builds Dropout)" in lines
    assert lines[-1].endswith("9 norm classes in 7 implementations (7 with a spec), "
                              "4 set aside (1 base, 1 block, 1 name, 1 no-norm)")


@pytest.mark.parametrize("args, words", [
    (["zoo", "list", "--root", "/no/such/folder"], "no such folder"),
    (["zoo", "list", "--package", "no_such_package_here"], "is not installed"),
    (["zoo", "list", "--dtypes", "float8"], "--dtypes"),
    (["zoo", "list", "--jobs", "0"], "--jobs"),
    (["zoo"], "required"),
])
def test_bad_usage_is_one_line_and_exit_2(cli_here, args, words):
    r = cli_here(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and words in r.stderr


def test_zoo_list_on_a_folder_builds_exports_and_lifts_and_writes_json(cli, tiny_models, tmp_path):
    out = tmp_path / "zoo.json"
    r = cli("zoo", "list", "--root", str(tiny_models), "--only", "AlphaRMSNorm,AlphaGatedRMSNorm",
            "--dtypes", "float32,bfloat16", "--json", str(out), "--quiet",
            env={"PYTHONPATH": f"{tiny_models.parent.parent}:{ROOT}"})
    assert r.returncode == 0, r.stderr
    rows = [ln.split()[:3] for ln in r.stdout.splitlines()[1:3]]
    assert rows == [["AlphaGatedRMSNorm", "1", "lifted"], ["AlphaRMSNorm", "3", "lifted"]]
    assert "built, exported and lifted: float32 2/2, bfloat16 2/2" in r.stdout
    import json

    data = json.loads(out.read_text())
    gated = next(p for p in data["builds"] if p["representative"].endswith(":AlphaGatedRMSNorm"))
    assert gated["outside"] == [] and "aten.silu.default" in gated["ops"] and "aten.rsqrt.default" in gated["ops"]


def test_zoo_list_on_transformers(cli):
    pytest.importorskip("transformers", reason="the zoo reads transformers: pip install 'normdiff[zoo]'")
    r = cli("zoo", "list", "--source-only")
    assert r.returncode == 0, r.stderr
    llama = next(ln for ln in r.stdout.splitlines() if ln.startswith("LlamaRMSNorm "))
    assert int(llama.split()[1]) > 100 and llama.split()[2] == "spec"
    assert "    RobertaPreLayerNormEmbeddings" in r.stdout
    assert r.stdout.splitlines()[-1].startswith("transformers ")
