"""The check every script normdiff writes pastes (the full script, a program's and a module case's, the short
script of a report): normdiff's decision, restated in NumPy, one `check` per output of a case of several.

A script must fail exactly where normdiff's verdict does, and pass
on a correct output; a plain `|out - ref| <= ATOL + RTOL*|ref|` over the
whole case cannot: its envelope is up to 2x looser than the bound (an ULP is
a step function of |ref|), and it knows nothing of the witness rule
(harness.oracle.compare: a compiled path's row is `inaccurate` when its error
beyond the per-element terms, per unit, is more than 2x eager's and 2x the
float32 witnesses' there, and more than the floor). So the check is the
rule itself, on normdiff's rows:

* a catalog norm's bound in its closed form, from the reference's own terms
  (z, kappa, w, b: harness.repro.script.reference_code): the
  per-element terms (C_OUT ULPs of the output, the statistics' rounding)
  and the unit |w|(kappa + |z|);
* a program's running bound (normdiff's interpreter derives it op by op:
  too long to paste) as per-row literals `RTOL·|ref| + ATOL`, at least the
  bound at every element of the row (exact where the bound is relative);
* the witnesses' allowance per row (compare.witness_allowance: what correct
  float32 implementations err there, measured by normdiff) as literals.

Literals are rounded up to three digits, so the script is never stricter
than normdiff. Without witnesses (batch_norm eval, a program none can run)
the rule is the bound and 2x eager's error in units of it; eager itself is
held to the bound.
"""
from __future__ import annotations

import math
import re
import textwrap

import numpy as np

from harness.core.dtypes import narrowest, ulp, unit_roundoff
from harness.oracle.compare import (C_ACC, C_IMPL, C_OUT, C_ROUND, EAGER_MULTIPLIER, out_ulps, program_unit,
                                    witness_allowance)
from harness.oracle.reference import Reference
from harness.spec import CaseSpec

WIDTH = 110  # the longest line a literal array is wrapped to


def up(v: float) -> float:
    """v rounded up to three significant digits (a readable threshold never below normdiff's)."""
    if not math.isfinite(v) or v <= 0:
        return float(v) if v > 0 else 0.0
    s = float(f"{v:.2e}")
    return s if s >= v else float(f"{v * (1 + 5e-3):.2e}")


def literal(values, name: str, comment: str, column: bool = False, width: int | None = WIDTH) -> str:
    """`NAME = value  # comment` for per-row values: one number where every row has it, else an array (a
    column, with `column`, to scale a row's elements); wrapped to `width`, or on one line where it is None (a
    short script, read whole: every line counts)."""
    vals = [up(float(v)) for v in np.asarray(values).reshape(-1)]
    text = ["np.inf" if v == math.inf else repr(v) for v in vals]
    if len(set(vals)) == 1:
        return f"{name} = {text[0]}  # {comment}"
    tail = "[:, None]" if column else ""
    one = f"{name} = np.array([{', '.join(text)}]){tail}"
    if width is None:
        return f"{one}  # {comment}"
    if len(one) <= width:
        return f"# {comment}\n{one}"
    body = textwrap.fill(", ".join(text), WIDTH - 4, initial_indent="    ",
                         subsequent_indent="    ", break_long_words=False)
    common = max(set(text), key=text.count)  # most rows often share one value (the floor): it, then the others
    rows = [i for i, t in enumerate(text) if t != common]
    index = f"{name}[{rows}{', 0' if column else ''}] = "
    others = index + ", ".join(text[i] for i in rows) + "," * (len(rows) == 1)
    if len(others) > WIDTH:
        others = index + "(\n" + textwrap.fill(", ".join(text[i] for i in rows) + ",", WIDTH - 4, initial_indent="    ",
                                               subsequent_indent="    ", break_long_words=False) + ")"
    array = f"# {comment}\n{name} = np.array([\n{body}]){tail}"
    if len(rows) <= len(text) // 4 and len(index) + 1 <= WIDTH and others.count("\n") + 1 < array.count("\n"):
        shape = f"({len(text)}, 1)" if column else str(len(text))
        return f"{name} = np.full({shape}, {common})  # {comment}\n{others}"
    return array


def rows_view(spec: CaseSpec, ref: Reference) -> str:
    """The expression viewing `a` (the output's shape) as one line per normalization row normdiff scores."""
    n_rows = int(ref.rows.max()) + 1 if ref.rows.size else 1
    flat = ref.rows.reshape(-1)
    if np.array_equal(flat, np.repeat(np.arange(n_rows), flat.size // n_rows)):
        return f"np.asarray(a).reshape({n_rows}, -1)"
    if spec.pattern == "batch_norm" and spec.program is None:
        return "np.moveaxis(np.asarray(a), 1, 0).reshape(a.shape[1], -1)  # batch_norm: one row per channel"
    order = np.argsort(flat, kind="stable").tolist()  # rows of equal length, elements not contiguous
    return f"np.asarray(a).reshape(-1)[{order}].reshape({n_rows}, -1)"


def _ulp(r: str) -> str:
    bits = round(-math.log2(unit_roundoff(r)))
    emin = round(math.log2(float(ulp(np.array(0.0), r)))) + bits  # the spacing at 0 is 2**(emin - bits)
    return (f"ulp = lambda v: np.ldexp(1.0, np.where(v == 0, {emin}, np.maximum(np.frexp(v)[1] - 1, {emin})) - {bits})"
            f"  # {r}'s spacing at v >= 0")


def _program_unit(ref: Reference, rounding: str, measured: bool, width: int | None) -> list[str]:
    """Per row RTOL and ATOL with RTOL·|ref| + ATOL at least the program's unit everywhere: its bound, or on a
    row where the bound is infinite somewhere 1 for the measured rule (absolute error), else infinity."""
    unit = program_unit(ref, rounding)
    n_rows = int(ref.rows.max()) + 1
    rtol, atol = np.zeros(n_rows), np.zeros(n_rows)
    for r in range(n_rows):
        u, a = unit[ref.rows == r], np.abs(ref.out[ref.rows == r])
        if not np.isfinite(ref.bound[ref.rows == r]).all():  # compare's unit on such a row
            rtol[r], atol[r] = 0.0, 1.0 if measured else math.inf
            continue
        big = (a >= np.median(a)) & (a > 0)
        rtol[r] = up(float(np.max(u[big] / a[big]))) if big.any() else 0.0
        atol[r] = up(float(max(0.0, np.max(u - rtol[r] * a))))
    what = "normdiff's running bound of the program (each of its roundings, carried to the output)"
    return [literal(rtol, "RTOL", f"per row, {what}, as RTOL*|ref| + ATOL: at least the bound everywhere", True, width),
            literal(atol, "ATOL", "per row (with RTOL 0: the bound is infinite on the row)", True, width),
            "unit = ATOL + RTOL * rows(np.abs(ref))",
            f"pe = rows({out_ulps(ref):g} * ulp(np.abs(ref) * {1 + 2 * unit_roundoff(rounding)!r}))"
            f"  # {out_ulps(ref):g} ulp of {rounding}: rounding the output"]


def _catalog_unit(ref: Reference, rounding: str) -> list[str]:
    u_stat = C_ROUND * unit_roundoff(ref.stat_dtype)
    return ["unit = rows(np.abs(w) * (kappa + np.abs(z)))  # how far an error in the row's statistics moves an output",
            f"pe = rows({C_OUT:g} * ulp(np.maximum(np.maximum(np.abs(ref), np.abs(w * z)), np.abs(b)) * "
            f"{1 + 2 * unit_roundoff(rounding)!r})) + {u_stat!r} * unit"
            f"  # {C_OUT:g} ulp of {rounding} (the output), {C_ROUND:g} u of {ref.stat_dtype} (the statistics)"]


def check_code(spec: CaseSpec, ref: Reference, path: str, expected: str, output: int | None = None,
               name: str | None = None, width: int | None = WIDTH) -> str:
    """Code defining `check(out, eager)`: 1 where normdiff's verdict on `out` fails (its shape, its dtype, a row
    beyond the rule), else 0, printing the errors and the rows failing. Every script normdiff writes pastes it
    (the full and module scripts, the short script): one decision, the comparator's.

    `ref` is the reference of the output checked; `expected` the expression of the dtype `out` must have
    (eager's, or torch's promotion for eager; a gradient's own, judged without eager). For output `output` of several (named `name`), the function is
    `check_OUTPUT(out, eager, ref=ref[OUTPUT])`: that output's thresholds and reference, the script's `ref`
    being the tuple of the outputs' references. `width` is the literals' (None: each on one line)."""
    rounding = narrowest(ref.rounding_dtype, ref.out_dtype)
    alone = ref.gradient  # a gradient is judged without eager, eager itself as any path (compare.score)
    compiled = path != "eager" and not alone
    program = ref.bound is not None
    lines = [f"rows = lambda a: {rows_view(spec, ref)}", _ulp(rounding)]
    allowed = witness_allowance(ref, rounding) if compiled or alone else None
    lines += _program_unit(ref, rounding, allowed is not None, width) if program else _catalog_unit(ref, rounding)
    if allowed is not None:
        lines.append(literal(allowed, "ALLOWED", f"per row, per unit: {EAGER_MULTIPLIER:g}x what normdiff's float32 "
                             "witnesses (correct implementations) err there, at least the floor", width=width))
        rule = ["excess = lambda e: np.where(e > pe, (e - pe) / unit, 0.0).max(1)  # beyond pe, per unit",
                "over = excess(err) > ALLOWED  # a gradient: judged alone, eager's error not read" if alone else
                f"over = excess(err) > np.maximum({EAGER_MULTIPLIER:g} * excess(eager_err), ALLOWED)"]
    else:
        if program:
            lines.append(f"tol = {C_IMPL:g} * ulp(rows(np.abs(ref)) * {1 + 2 * unit_roundoff(rounding)!r}) + unit"
                         "  # the bound")
        else:
            acc = C_ACC * unit_roundoff("float32") * math.sqrt(ref.row_len)
            lines.append(f"tol = pe + {acc!r} * unit  # the bound: pe plus float32 sums over {ref.row_len} elements")
        eager_share = f"np.maximum(1.0, {EAGER_MULTIPLIER:g} * ratio(eager_err))" if compiled else "1.0"
        rule = ["ratio = lambda e: (e / tol).max(1)  # in units of the bound",
                f"over = ratio(err) > {eager_share}" + (f"  # over it and {EAGER_MULTIPLIER:g}x eager's" if compiled else "")]
    label = "" if name is None else f"output {name}: "
    lines += [f'if out.shape != ref.shape: return print(f"{label}{path} output shape {{out.shape}}, expected '
              '{ref.shape}") or 1  # shape_mismatch',
              "err, eager_err = (rows(np.nan_to_num(np.abs(a.astype(np.float64) - ref), nan=np.inf))"
              " for a in (out, eager))  # NaN: no bound holds it",
              *rule,
              f'print(f"{label}max abs error: {path} {{err.max():.6g}}, eager {{eager_err.max():.6g}}; rows failing: '
              f'{{over.sum()}} of {{over.size}}; dtype {{out.dtype}}, expected {{{expected}}}")',
              f"return 1 if over.any() or out.dtype != {expected} else 0"]
    head = "def check(out, eager):" if output is None else f"def check_{output}(out, eager, ref=ref[{output}]):"
    about = ("# -- normdiff's check (its comparator's rule), per normalization row, with the thresholds it "
             "derived here" + ("" if name is None else f": output {name}"))
    return "\n".join([about, head, textwrap.indent("\n".join(lines), "    ")]) + "\n"


_ASSIGN = re.compile(r"^    (\w+) = (.*?)(?:  # (.*))?$")


def shared_check_code(checks: list[str], names: list[str], expected: list[str]) -> str | None:
    """One `check(out, eager, ref, name, **thresholds)` for the outputs of a case of several, from their
    check_code(…, output=k, name=names[k], width=None): the lines every output shares, once; the assignments
    that differ (each output's thresholds: RTOL, ATOL, ALLOWED, its rows, its dtype) as THRESHOLDS, one line
    per output. The same decision, each output held to its own numbers. None where the checks differ
    otherwise (each keeps its own function then)."""
    bodies = []
    for text, name, dtype in zip(checks, names, expected):
        body = text.split("\n")[2:]
        if len(set(expected)) > 1:
            body = [line.replace(f"{{{dtype}}}", "{expected}").replace(f"!= {dtype} ", "!= expected ") for line in body]
        bodies.append([line.replace(f"output {name}: ", "output {name}: ") for line in body if line])
    if len({len(b) for b in bodies}) != 1:
        return None
    params: list[tuple[str, str]] = []  # (its name, its comment)
    common = []
    for lines in zip(*bodies):
        if len(set(lines)) == 1:
            common.append(lines[0])
            continue
        found = [_ASSIGN.match(line) for line in lines]
        if not all(found) or len({m[1] for m in found}) != 1:
            return None
        params.append((found[0][1], found[0][3] or ""))
    values = [[m[2] for m in (_ASSIGN.match(line) for line in b) if m and m[1] in dict(params)] for b in bodies]
    if len(set(expected)) > 1:
        params.append(("expected", "the dtype the output must have"))
        values = [v + [d] for v, d in zip(values, expected)]
    keys = [p for p, _ in params]
    about = ("# -- normdiff's check (its comparator's rule), per normalization row, each output with the thresholds "
             "it derived for it (THRESHOLDS: " + "; ".join(f"{p}: {c}" for p, c in params if c) + ")")
    entries = [f"{name!r}: dict({', '.join(f'{k}={v}' for k, v in zip(keys, vals))})," for name, vals in zip(names, values)]
    lines = [about, f"def check(out, eager, ref, name, {', '.join(keys)}):", *common,
             "THRESHOLDS = {" + entries[0], *("    " + e for e in entries[1:])]  # the first output's on the opening line
    return "\n".join(lines)[:-1] + "}\n"  # the last output's line closes the dict
