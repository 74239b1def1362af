"""Triage rules of the shapes suite: failures of a symbolic compile (cases/shapes.py, docs/shapes.md).

Each rule matches only symbolic records (a case with `dynamic`) whose failure
is the symbolic compile's own: a wrong output its static control (the same
size compiled statically) does not share (`static_scope` is not "also
static"), or a compile error only a symbolic compile gives (its message
names a symbolic size, or the static compile builds). A symbolic failure the
static compile shares falls through to the older rules, which explain it as
they explain the static one. Written from the records of `normdiff run --suite shapes` on every path
with the pinned versions (torch 2.13.0, apache-tvm 0.27.0.post1, executorch
1.5.1, onnxruntime 1.32.0, iree 3.13.0, openvino 2026.4.1).
"""
from __future__ import annotations

import math

from cases._triage_record import Record, Rule, _case, _msg
from harness.core.records import ALSO_STATIC, static_scope
from harness.core.verdicts import Verdict

TVM = ("tvm", "tvm-decompose", "tvm-decompose-inference")
WRONG = (Verdict.INACCURATE, Verdict.NONFINITE)
FLOAT16_COUNT = 65520  # the first element count float16 rounds to inf


def _symbolic(r: Record) -> bool:
    return bool(_case(r).get("dynamic"))


def _symbolic_own(r: Record) -> bool:
    """A symbolic record whose failure the static compile of its size does not share."""
    return bool(_case(r).get("dynamic")) and static_scope(r) != ALSO_STATIC


def _count(r: Record) -> int:
    """The element count the record's norm reduces over: instance norm's spatial size, a group's elements, a
    program's last dim."""
    case = _case(r)
    shape = case["shape"]
    if case.get("program") is not None or case["pattern"] in ("layer_norm", "rms_norm"):
        return shape[-1]
    spatial = math.prod(shape[2:])
    return spatial * shape[1] // case.get("groups", 1) if case["pattern"] == "group_norm" else spatial


def _on(*paths: str):
    return lambda r: r["path"] in paths


SHAPES_RULES: tuple[Rule, ...] = (
    Rule("apache/tvm#17744", "symbolic only: a float16 norm's element count past 65,504 is a run-time value in the "
                             "symbolic compile, so the float16 literal check (#17744) that refuses the static compile "
                             "('Literal value 65520 exceeds maximum of float16') never runs: the count is inf and the "
                             "output thousands off",
         lambda r: r["path"] in TVM and _symbolic_own(r) and _case(r)["dtype"] == "float16"
         and r["verdict"] in WRONG and _count(r) >= FLOAT16_COUNT),
    Rule("new", "symbolic only: TOPI's instance/group norm compiled for a symbolic length errs several times the "
                "bound at lengths where the static compile of the same length passes (2,049-4,097 and more; the "
                "issue's 5x at 4,099): the reduction over a run-time length is not the one a static length gets",
         lambda r: r["path"] in TVM and _symbolic_own(r) and r["verdict"] in WRONG
         and _case(r)["pattern"] in ("instance_norm", "group_norm") and _case(r).get("program") is None),
    Rule("new", "from_exported_program cannot import a norm whose normalized shape is symbolic "
                "(F.layer_norm(x, (x.shape[-1],)) over a symbolic length: int() of a SizeVar); the static import "
                "of each length gets past it",
         lambda r: r["path"] in TVM and _symbolic(r) and r["verdict"] == Verdict.ERROR
         and "int() argument must be" in _msg(r) and "'Node'" in _msg(r)),
    Rule("new", "symbolic only: the symbolic compile of F.instance_norm over a dynamic length gives non-finite "
                "values at every length where the static compile of each passes (the construct of "
                "iree-org/iree#23650: instance norm over a dynamic dim)",
         lambda r: r["path"] == "iree" and _symbolic_own(r) and r["verdict"] in WRONG
         and _case(r)["pattern"] == "instance_norm"),
    Rule("new", "iree-compile fails to link the dispatch of a bfloat16 layer norm over a dynamic length ('failed "
                "to link executable and generate target dylib'), where the static compile of each length builds "
                "(and runs, with the bfloat16 reduction's error where it has one)",
         lambda r: r["path"] == "iree" and _symbolic(r) and r["verdict"] == Verdict.ERROR
         and "failed to link executable" in _msg(r)
         and (r.get("static_control") or {}).get("verdict") != Verdict.ERROR),
)
