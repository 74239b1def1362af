"""The repro script's stage table: which stage of the compiled norm lost the precision (docs/attribution.md).

A script whose path declares `has_intermediates` (its `script_calls`
define `intermediates(model, example, x)`) gets this section:
the program's stages in FP64 NumPy (stage_code), each stage's bound as a
plain tolerance ATOL + RTOL*|value| that is at least normdiff's bound at
every element (so the script never calls a stage over that normdiff calls
within), normdiff's pairing rule (harness/attribution/match.py, copied as
source), and `print_stage_table`, which the check calls when the output is
wrong: stage, the dtype the path computed it in, its error in units of its
bound, and the first stage over its bound (for a dtype mismatch: the first
whose dtype differs from the program's).
"""
from __future__ import annotations

import inspect
import math

import numpy as np

from harness.attribution import match
from harness.attribution.capture import Unavailable
from harness.attribution.stages import BackwardCase, case_program, program_stages
from harness.spec import CaseSpec
from harness.oracle.inputs import make_inputs
from harness.repro.stage_code import stage_lines


def _up(v: float) -> float:
    """v rounded up to three significant digits."""
    if not math.isfinite(v):
        return v
    if v <= 0:
        return 0.0
    s = float(f"{v:.2e}")
    return s if s >= v else float(f"{v * 1.01:.2e}")


def stage_tolerance(value, err) -> tuple[float, float]:
    """(rtol, atol) with atol + rtol*|value| >= err wherever value is finite."""
    value, err = np.asarray(value, dtype=np.float64), np.broadcast_to(np.asarray(err, dtype=np.float64), np.shape(value))
    finite = np.isfinite(value)
    if not finite.any():
        return 0.0, 0.0
    mag, err = np.abs(value[finite]), err[finite]
    if not np.isfinite(err).all():
        return 0.0, math.inf
    nonzero = mag > 0
    rtol = float((err[nonzero] / mag[nonzero]).min()) if nonzero.any() else 0.0
    atol = float(max(0.0, (err - rtol * mag).max()))
    return _up(rtol), _up(atol)


def _num(v: float) -> str:
    return repr(v) if math.isfinite(v) else 'float("inf")'


_TABLE_IMPORT = "from harness.program.ops import "


def _match_source() -> str:
    """harness/attribution/match.py without its module docstring (the script says where it comes from),
    the op table's names it imports written out as literals (the script imports nothing of normdiff)."""
    source = inspect.getsource(match)
    tree_doc = match.__doc__ or ""
    body = source.split('"""', 2)[2] if source.lstrip().startswith('"""') and tree_doc else source
    lines = []
    for line in body.strip("\n").split("\n"):
        if line.startswith(_TABLE_IMPORT):
            for name in ("_CANONICAL", "_CLASS", "_LAYOUT", "_PARTS"):
                value = getattr(match, name)
                lines.append(f"{name} = set({sorted(value)!r})" if isinstance(value, frozenset) else f"{name} = {value!r}")
            continue
        lines.append(line)
    return "\n".join(lines)


TABLE = '''\
def print_stage_table(model, example, x, out, dtype_problem):
    """Each program stage next to the path's intermediate that computes it (normdiff's attribution)."""
    found, output, rerun = intermediates(model, example, x)
    flat = lambda a: a if isinstance(a, tuple) else (a,)  # a case of several outputs: each of them
    bits = lambda a, b: a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    # each output's intermediate: the one the reader names for the first, the last with its bits for the others
    returned = [output] if not isinstance(rerun, tuple) else [
        output if k == 0 and output is not None else
        next((i for i in range(len(found) - 1, -1, -1) if bits(found[i][3], o)), None) for k, o in enumerate(rerun)]
    keep = [i for i, item in enumerate(found) if canonical(item[1]) is not None or i in returned]
    candidates = [(canonical(found[i][1]) or "layout", found[i][3]) for i in keep]
    stages = program_stages()
    anchors = {k: keep.index(returned[s[5]]) for k, s in enumerate(stages)  # several outputs: each its stage
               if s[5] is not None and s[5] < len(returned) and returned[s[5]] is not None} or None
    pairs = align([(s[1], s[3]) for s in stages], candidates, keep.index(output) if output in keep else None, anchors)
    print("stage table: each program stage, the dtype the path computed it in, its error in units of its bound")
    print(f"  {'stage':34s} {'op':10s} {'computed':9s} {'program':9s} {'err/bound':>10s}  intermediate")
    first = None
    for k, (label, op, program_dtype, value, part, _) in enumerate(stages):
        if k not in pairs:
            if not part:
                print(f"  {label:34s} {op:10s} {'-':9s} {program_dtype:9s} {'-':>10s}  (not computed as such)")
            continue
        name, inter_op, dtype, array = found[keep[pairs[k]]]
        rtol, atol = STAGE_TOLERANCE[label]
        ratio = err_over_bound(value, atol + rtol * np.abs(value), array)
        over = ratio > 1.0
        if first is None and ((dtype_problem and dtype != program_dtype) or (not dtype_problem and over)):
            first = (label, dtype, program_dtype, ratio)
        mark = "  <- over its bound" if over else ""
        print(f"  {label:34s} {op:10s} {dtype:9s} {program_dtype:9s} {ratio:10.3g}  {name} = {inter_op}{mark}")
    same = rerun is not None and len(flat(rerun)) == len(flat(out)) and all(
        bits(r, o) for r, o in zip(flat(rerun), flat(out)))
    if not same:
        print("  (approximate: the run with its intermediates exposed does not give the path's output bit for bit)")
    if first is None:
        print("first stage over its bound: none")
    elif dtype_problem:
        print(f"first stage whose dtype differs from the program's: {first[0]} "
              f"(computed in {first[1]}, the program computes it in {first[2]}; {first[3]:.3g}x its bound)")
    else:
        print(f"first stage over its bound: {first[0]} (computed in {first[1]}, {first[3]:.3g}x its bound)")
'''


def _gradient_program(spec: CaseSpec):
    """(program, case, stages, script names) of a gradient case: its lifted backward's (docs/attribution.md "The
    backward"), reading the script's inputs and cotangents by their names and the parameters off its model."""
    from harness.repro import gradient_script as G

    made = G.setup(spec)
    lifted = made.backward
    stages = program_stages(spec, made.inputs, backward=BackwardCase(lifted, made.build))
    names = {**{n: n for n in lifted.inputs},
             **{p: f"to_numpy(STATE[{s!r}].detach())" for s, p in lifted.params.items()}}  # reference_code's STATE
    return lifted.program, lifted.case, stages, names


def stage_section(spec: CaseSpec) -> str | None:
    """The script section defining print_stage_table for `spec`; None when the case has no program."""
    if spec.grad:
        program, info, stages, names = _gradient_program(spec)
    else:
        try:
            program, info = case_program(spec)
        except Unavailable:
            return None
        stages = program_stages(spec, make_inputs(spec))
        names = {"w": "weight", "b": "bias"} if spec.program is None else {n: n for n, _ in spec.param_shapes}
    lines, emitted = stage_lines(program, info, names)
    if [(s, op) for s, op, _, _ in emitted] != [tuple(p.label.split("#")[0].split(":", 1)) for p in stages]:
        return None  # pragma: no cover - the two walks disagree: no table rather than a wrong one
    body = ["def program_stages():",
            '    """(label, op, program dtype, FP64 value, a norm\'s part, the output it gives or None) of every stage,'
            ' in program order."""']
    body += [f"    {line}" for line in lines]
    body.append("    return [")
    body += [f"        ({p.label!r}, {p.op!r}, {p.dtype!r}, {var}, {p.part!r}, {p.returns!r}),"
             for p, (_, _, _, var) in zip(stages, emitted)]
    body.append("    ]")
    tolerance = ["STAGE_TOLERANCE = {  # label: (RTOL, ATOL), at least normdiff's bound of the stage"]
    for p in stages:
        rtol, atol = stage_tolerance(p.value, p.err)
        tolerance.append(f"    {p.label!r}: ({_num(rtol)}, {_num(atol)}),")
    tolerance.append("}")
    return "\n\n\n".join([
        "# -- attribution: the program's stages in FP64, their bounds, and normdiff's rule pairing each\n"
        "#    with the path's intermediate that computes it (normdiff's attribution rule, as normdiff runs it)",
        _match_source(), "\n".join(body), "\n".join(tolerance), TABLE.strip("\n")])
