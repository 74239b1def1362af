"""The gradient benchmark of `make oracle-check`: its cases, and each gradient of each implementation judged.

Cases (`cases()`): `"grad": true` catalog norms (layer, rms and group norm,
the `module` style) in float16 and bfloat16 with drawn weights, on many rows
(thousands: the weight and bias gradients sum over all of them) and on long
rows (4,096 and more: the input gradient's row sums), the row lengths not all
powers of two (1/N is inexact there), on normal, offset and outlier inputs.
Nothing here is chosen from the oracle's verdicts.

Each gradient of each implementation is one outcome (`run_case`): normdiff's
verdict is that gradient's own score in the record (docs/gradients.md), the
ground truth is harness.benchmark.truth's rule with the correct
implementations alone as its known-good outputs (eager is not one for
gradients: issue 46), and the anchors' oracles see the same gradient against
eager's (torch autograd) and, as tests of reduced-precision training often
write it, `torch.testing.assert_close` against a float32 run of the same
module rounded to the gradient's dtype.
"""
from __future__ import annotations

import copy

from harness.benchmark import anchors, truth
from harness.benchmark.outcome import NORMDIFF, Outcome
from harness.core.verdicts import Verdict
from harness.spec import CaseSpec, input_of

FLOAT32_RUN = "assert_close vs a float32 run"
DTYPES = ("float16", "bfloat16")
# (pattern, shape, extra keys): many rows (the parameter gradients' sums), long rows (the input gradient's)
STRUCTURES = [
    ("layer_norm", [4096, 96], {}),
    ("layer_norm", [4, 5120], {}),
    ("rms_norm", [4096, 96], {}),
    ("rms_norm", [4, 5120], {}),
    ("group_norm", [64, 24, 64], {"groups": 4}),    # rows of 384; d_weight sums 4,096 per channel
    ("group_norm", [2, 16, 1536], {"groups": 4}),   # rows of 6,144
]
INPUTS = [{"kind": "normal"}, {"kind": "offset", "offset": 100.0, "std": 1.0}, input_of("outlier")]


def cases(quick: bool = False) -> list[CaseSpec]:
    """The benchmark's gradient specs; `quick` keeps the first structure of each pattern and the normal input."""
    specs = []
    seen = set()
    for pattern, shape, extra in STRUCTURES:
        if quick and pattern in seen:
            continue
        seen.add(pattern)
        for dtype in DTYPES:
            for inp in (INPUTS[:1] if quick else INPUTS):
                specs.append(CaseSpec.from_dict({"pattern": pattern, "dtype": dtype, "shape": shape,
                                                 "params": {"kind": "normal"}, "input": inp, "grad": True,
                                                 **extra}))
    return specs


def float32_run(setup) -> tuple:
    """The case's gradients from the same module and inputs run in float32, rounded to each gradient's dtype."""
    import torch

    from harness.core.tensors import to_numpy
    from harness.oracle.backward import Backward

    module, example = setup.build()
    twin = Backward(copy.deepcopy(module.forward_module).float(), module.n_inputs)
    grads = twin(*[t.float() for t in example])
    low = [g.dtype for g in module(*example)]
    with torch.no_grad():
        return tuple(to_numpy(g.to(d)) for g, d in zip(grads, low))


def run_case(spec: CaseSpec, names: dict[str, type], executor, runner, detail: bool = False) -> list:
    """Every implementation's every gradient on `spec`: normdiff's score of it, the ground truth, the anchors."""
    from harness.engine.cases import CaseProblem

    try:
        setup = executor.cases.setup(spec)
    except CaseProblem:
        return []
    if setup.problem is not None:
        return []
    refs, grad_names = setup.ref.each, setup.ref.output_names
    eager, f32 = runner.output("eager", spec, setup), float32_run(setup)
    records, outputs = {}, {}
    for name in names:
        record = executor.execute(spec, name)
        if record["verdict"] in (Verdict.UNSUPPORTED, Verdict.ERROR):
            continue
        records[name], outputs[name] = record, runner.output(name, spec, setup)
    good = [outputs[n] for n in outputs if names[n].correct]
    result = []
    for k, (ref, gname) in enumerate(zip(refs, grad_names)):
        baseline = truth.baseline_rows([g[k] for g in good], ref)
        for name, out in outputs.items():
            if names[name].correct:
                kind, reason = "correct", None
            else:
                judged = truth.judge(out[k], ref, ref.out_dtype, baseline)
                kind, reason = ("wrong" if judged.wrong else "left-out"), judged.reason
            score = records[name].scores[k]
            flags = {NORMDIFF: score.verdict != Verdict.PASS}
            if kind != "left-out":
                for anchor, oracle in anchors.ANCHORS.items():
                    flags[anchor] = oracle(out[k], eager[k], ref.out)
                flags[FLOAT32_RUN] = anchors.assert_close(out[k], f32[k], ref.out)
            result.append(Outcome(spec, f"{name} {gname}", kind, reason, score.verdict, score.message or "",
                                  score.max_err_over_tol, flags))
    return result
