"""The `inductor` and `inductor-emulate` paths against the real torch.compile (torch 2.13, CPU).

Known-good cases pass on both; the bfloat16 Qwen norm where Inductor skips
eager's intermediate rounding (and so lands closer to FP64) passes on
`inductor`, and `inductor-emulate` keeps that rounding; each prepare is its
own compile, with its own config, even for two paths on one structure.
The first compile in a process warms Inductor up; later ones cost a fraction
of it.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from harness import paths
from harness.spec import CaseSpec
from harness.core.tensors import to_torch
from harness.engine.execute import execute
from harness.oracle.inputs import make_inputs
from harness.oracle.modules import build_module

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("inductor"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # torch.jit, imported by Inductor, not ours
]

INDUCTOR = ["inductor", "inductor-emulate"]

# The bfloat16 Qwen norm: eager rounds h.to(bfloat16) before the weight multiply;
# Inductor fuses the two and rounds once.
QWEN_BF16 = {"pattern": "rms_norm", "style": "qwen", "dtype": "bfloat16", "shape": [4, 4096],
             "params": {"kind": "normal"}}

KNOWN_GOOD = [
    {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
     "input": {"kind": "alternating", "amplitude": 0.25, "offset": 0}},      # the TVM seed
    {"pattern": "rms_norm", "style": "qwen", "dtype": "float16", "shape": [2, 8, 64],
     "params": {"kind": "normal"}},                                            # the ExecuTorch seed
    {"pattern": "layer_norm", "style": "upcast", "dtype": "bfloat16", "shape": [2, 64]},
    {"pattern": "group_norm", "dtype": "float32", "shape": [2, 8, 4, 4], "groups": 2},
    {"pattern": "batch_norm", "dtype": "float16", "shape": [2, 4, 3, 3], "params": {"kind": "normal"}},
]


def _prepare(raw: dict, path: str):
    spec = CaseSpec.from_dict(raw)
    inputs = make_inputs(spec)
    module = build_module(spec, inputs.params)
    return inputs, paths.get(path).prepare(spec, module, to_torch(inputs.x, spec.layout))


@pytest.mark.parametrize("path", INDUCTOR)
@pytest.mark.parametrize("raw", KNOWN_GOOD, ids=lambda r: f"{r['pattern']}-{r.get('style', 'module')}-{r['dtype']}")
def test_known_good_cases_pass(raw, path):
    rec = execute(raw, path)
    assert rec["verdict"] == "pass", rec["message"]
    assert rec["out_dtype"] == rec["expected_dtype"]
    # one graph, no graph break: the whole norm went through Inductor
    assert rec["facts"]["inductor_graphs"] == 1 and rec["facts"]["inductor_graph_breaks"] == 0
    assert rec["facts"]["inductor_emulate_precision_casts"] is (path == "inductor-emulate")


def test_bfloat16_qwen_closer_to_fp64_than_eager_passes():
    """Inductor skips eager's rounding of h before the weight multiply: closer to FP64, not blamed."""
    rec = execute(QWEN_BF16, "inductor")
    assert rec["verdict"] == "pass", rec["message"]
    assert rec["max_abs_err"] < 0.9 * rec["eager_max_abs_err"], (rec["max_abs_err"], rec["eager_max_abs_err"])
    assert rec["max_ulp"] <= 0.5 + 1e-6  # correctly rounded: one rounding, at the end

    emu = execute(QWEN_BF16, "inductor-emulate")
    assert emu["verdict"] == "pass", emu["message"]
    # with eager's roundings kept, the error is eager's (the order of the sum may differ slightly)
    assert emu["max_abs_err"] == pytest.approx(emu["eager_max_abs_err"], rel=0.05)
    assert emu["max_abs_err"] > 1.1 * rec["max_abs_err"]


def test_each_prepare_is_its_own_compile_with_its_own_config():
    """Dynamo's cache would hand `inductor-emulate` the kernels `inductor` compiled for the same
    forward; each prepare resets it, and a prepared case whose kernels a later prepare dropped
    is compiled again with its own config before it runs."""
    inputs, plain = _prepare(QWEN_BF16, "inductor")
    first = plain.run(inputs.x)
    _, emulate = _prepare(QWEN_BF16, "inductor-emulate")
    emulated = emulate.run(inputs.x)
    assert not np.array_equal(first.view(np.uint16), emulated.view(np.uint16))
    # back to the first artifact: the same bits as before, not the emulating kernels
    np.testing.assert_array_equal(plain.run(inputs.x).view(np.uint16), first.view(np.uint16))
    np.testing.assert_array_equal(emulate.run(inputs.x).view(np.uint16), emulated.view(np.uint16))


def test_a_new_input_reuses_the_compiled_artifact():
    """Runs forbid recompiling: the same structure with another input runs the prepared kernels."""
    spec = CaseSpec.from_dict({**QWEN_BF16, "input": {"kind": "uniform", "low": -3, "high": 3}})
    base = CaseSpec.from_dict(QWEN_BF16)
    assert spec.structure_key() == base.structure_key()
    inputs, prepared = _prepare(QWEN_BF16, "inductor")
    other = make_inputs(spec)
    out = prepared.run(other.x)
    assert out.dtype == inputs.x.dtype and out.shape == tuple(spec.shape)
    assert not np.array_equal(out.view(np.uint16), prepared.run(inputs.x).view(np.uint16))


# inductor's script on a trivial case: tests/paths/test_registry.py; here the emulating one on bfloat16.
@pytest.mark.parametrize("path", ["inductor-emulate"])
def test_repro_script_of_a_passing_case_exits_0(path, cli_here, tmp_path):
    spec = tmp_path / "qwen.json"
    spec.write_text('{"pattern": "rms_norm", "style": "qwen", "dtype": "bfloat16", "shape": [4, 4096], '
                    '"params": {"kind": "normal"}}')
    script = tmp_path / "repro.py"
    proc = cli_here("repro", str(spec), "--path", path, "-o", str(script))
    assert proc.returncode == 0, proc.stderr
    text = script.read_text()
    assert "torch.compile(model, dynamic=False)" in text
    assert ("emulate_precision_casts=True" in text) is (path == "inductor-emulate")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert f"OK: {path} matches the FP64 reference" in run.stdout


class _Broken(torch.nn.Module):
    """A norm whose forward has a graph break after it: Dynamo cannot capture it as one graph."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        import torch

        y = self.inner(x)
        torch._dynamo.graph_break()
        return y * 1


def test_a_forward_in_one_graph_is_precompiled_and_kept_else_traced_and_not():
    """One graph: Dynamo's AOT precompile, whose function the cache keeps. A graph break (or the caches off)
    takes the plain torch.compile, and nothing is kept: the facts say which."""
    from harness.engine.cache import library_caches

    spec = CaseSpec.from_dict(KNOWN_GOOD[1])
    inputs = make_inputs(spec)
    path = paths.get("inductor")
    example = to_torch(inputs.x, spec.layout)
    whole = path.prepare(spec, build_module(spec, inputs.params), example)
    assert whole.facts["inductor_precompiled"] == "miss" and path.artifact(whole)

    broken = path.prepare(spec, _Broken(build_module(spec, inputs.params)), example)
    assert broken.facts["inductor_precompiled"] == "off" and broken.facts["inductor_graph_breaks"] >= 1
    assert path.artifact(broken) is None
    np.testing.assert_array_equal(broken.run(inputs.x).view(np.uint16), whole.run(inputs.x).view(np.uint16))

    with library_caches(None):  # --no-cache: precompiling needs Inductor's caches
        off = path.prepare(spec, build_module(spec, inputs.params), example)
    assert off.facts["inductor_precompiled"] == "off" and path.artifact(off) is None
    np.testing.assert_array_equal(off.run(inputs.x).view(np.uint16), whole.run(inputs.x).view(np.uint16))


def test_a_traced_artifact_still_runs_after_a_precompile_reset_dynamo():
    """A precompile resets Dynamo too: a plain-compiled case prepared before it is compiled again, with
    its own config, rather than run on what Dynamo no longer holds."""
    spec = CaseSpec.from_dict(KNOWN_GOOD[1])
    inputs = make_inputs(spec)
    example = to_torch(inputs.x, spec.layout)
    broken = paths.get("inductor-emulate").prepare(spec, _Broken(build_module(spec, inputs.params)), example)
    first = broken.run(inputs.x)
    whole = paths.get("inductor").prepare(spec, build_module(spec, inputs.params), example)
    assert whole.facts["inductor_precompiled"] == "miss" and broken.facts["inductor_precompiled"] == "off"
    np.testing.assert_array_equal(broken.run(inputs.x).view(np.uint16), first.view(np.uint16))


def test_a_gradient_case_runs_autograd_through_the_compiled_forward():
    """AOTAutograd compiles the forward and the backward (two Inductor graphs for the one Dynamo graph)."""
    from helpers import grad_case, grad_error

    spec, build, example, x, expected = grad_case(
        {"pattern": "layer_norm", "dtype": "float16", "shape": [8, 32], "params": {"kind": "normal"}})
    path = paths.get("inductor")
    prepared = path.prepare(spec, build(), example)
    out = prepared.run(x)
    assert [(o.shape, str(o.dtype)) for o in out] == [((8, 32), "float16"), ((32,), "float16"), ((32,), "float16")]
    assert max(grad_error(out, expected)) < 2e-3
    facts = prepared.facts
    assert facts["inductor_backward"] == "compiled (AOTAutograd)" and facts["inductor_compiled_graphs"] == 2
    # Inductor's decomposition table decomposes the backward op before its kernels
    assert facts["joint_backward_ops"] == ["aten.native_layer_norm_backward.default"] and facts["backward_kept"] == []
    assert facts["inductor_precompiled"] == "miss" and path.artifact(prepared)  # precompiled: both graphs, kept


def test_a_symbolic_compile_from_a_size_1_example_serves_every_size_and_counts_its_compiles():
    """mark_dynamic alone refuses a size-1 example (0/1 specialisation); compiled size-oblivious, one graph serves
    1, 5 and 300 rows, and the fact `compiles`, read after the runs, says so."""
    raw = {"pattern": "layer_norm", "dtype": "float32", "shape": [1, 16], "dynamic": [0]}
    _, prepared = _prepare(raw, "inductor")
    for rows in (1, 5, 300):
        spec = CaseSpec.from_dict({**raw, "shape": [rows, 16]})
        inputs = make_inputs(spec)
        module = build_module(spec, inputs.params)
        with torch.no_grad():
            eager = module(to_torch(inputs.x, spec.layout)).numpy()
        np.testing.assert_allclose(prepared.run(inputs.x), eager, rtol=1e-5, atol=1e-5)
    assert prepared.facts["compiles"] == 1


def _bits(out) -> list[bytes]:
    return [np.ascontiguousarray(o).tobytes() for o in (out if isinstance(out, tuple) else (out,))]


def _cold_then_warm(path, spec, build, runs):
    """The plain compile (--no-cache), the precompile (cold) and its artifact restored (warm) of one case:
    (their outputs on each of `runs`, as bytes, and the three Prepared). `build()` -> (module, example)."""
    from harness.engine.cache import library_caches

    with library_caches(None):
        plain = path.prepare(spec, *build())
        plain_out = [_bits(plain.run(x)) for x in runs]
    cold = path.prepare(spec, *build())
    data = path.artifact(cold)
    assert data, "a precompiled case is kept"
    warm = path.restore(spec, data, build=build)
    return plain_out, [_bits(cold.run(x)) for x in runs], [_bits(warm.run(x)) for x in runs], (plain, cold, warm)


@pytest.mark.parametrize("path", INDUCTOR)
def test_a_gradient_case_s_compiled_backward_is_kept_and_restores_bit_for_bit(path):
    """The training flow precompiled (AOTAutograd's forward and backward bundled) is kept: the warm restore
    gives the cold run's gradients, which are the plain compile's, byte for byte, and the same facts."""
    from helpers import grad_case

    spec, build, example, x, _ = grad_case(
        {"pattern": "rms_norm", "style": "qwen", "dtype": "bfloat16", "shape": [4, 64], "params": {"kind": "normal"}})
    plain_out, cold_out, warm_out, (plain, cold, warm) = _cold_then_warm(
        paths.get(path), spec, lambda: (build(), example), [x])
    assert plain_out == cold_out == warm_out
    assert (plain.facts["inductor_precompiled"], cold.facts["inductor_precompiled"],
            warm.facts["inductor_precompiled"]) == ("off", "miss", "hit")
    caches = paths.get(path).cache_facts
    assert {k: v for k, v in cold.facts.items() if k not in caches} == \
        {k: v for k, v in plain.facts.items() if k not in caches}
    assert cold.facts["inductor_compiled_graphs"] == 2


def test_a_symbolic_compile_is_kept_and_its_restore_serves_every_size_bit_for_bit():
    """mark_dynamic's compile precompiled from a size-2 example (instance_norm: torch guards the size away
    from 1, so [2, max]): restored, it runs every size with the plain compile's bytes, one compile."""
    raw = {"pattern": "instance_norm", "dtype": "float16", "shape": [1, 4, 7], "dynamic": [2]}
    spec = CaseSpec.from_dict(raw)
    inputs = make_inputs(spec)

    def build():
        return build_module(spec, inputs.params), to_torch(inputs.x, spec.layout)

    runs = [make_inputs(CaseSpec.from_dict({**raw, "shape": [1, 4, n]})).x for n in (2, 7, 4099)]
    plain_out, cold_out, warm_out, (plain, cold, warm) = _cold_then_warm(paths.get("inductor"), spec, build, runs)
    assert plain_out == cold_out == warm_out
    assert cold.facts["inductor_precompiled"] == "miss" and warm.facts["inductor_precompiled"] == "hit"
    assert plain.facts["compiles"] == cold.facts["compiles"] == 1


def test_a_size_the_precompiled_guards_exclude_runs_the_plain_compile_and_is_counted():
    """Past dynamic_max (the guards' top) a precompiled function refuses the input: the plain compile of the case
    runs it instead, recompiling at that size as the plain compile does, and `compiles` counts it, as there."""
    raw = {"pattern": "layer_norm", "dtype": "float32", "shape": [1, 16], "dynamic": [0], "dynamic_max": 64}
    spec = CaseSpec.from_dict(raw)
    inputs = make_inputs(spec)

    def build():
        return build_module(spec, inputs.params), to_torch(inputs.x, spec.layout)

    runs = [np.random.default_rng(3).standard_normal((n, 16)).astype(np.float32) for n in (5, 100)]
    plain_out, cold_out, warm_out, (plain, cold, warm) = _cold_then_warm(paths.get("inductor"), spec, build, runs)
    assert plain_out == cold_out == warm_out
    assert plain.facts["compiles"] == cold.facts["compiles"] == warm.facts["compiles"] == 2
