"""Attribution: which stage of a compiled norm lost the precision (docs/contracts.md §4, docs/attribution.md).

For a failing execution (inaccurate, dtype_mismatch, nonfinite), the path is
asked for its intermediates (`Path.intermediates`, docs/contracts.md §6: TVM returns
every binding of main as an output, eager and the recompose paths run their
graph node by node, an out-of-tree path does what it can; the default says
"not available"), each is matched to the program stage it computes
(match.py) and scored against that stage's FP64 value and bound
(harness.program.expand). Passing executions never come here. Modules:
capture (the readers' types, from the path face), stages (the program of a
case), match (the pairing rule, NumPy only, copied into repro scripts),
score (the entries), annotate (the record keys), describe (their text).
"""
from harness.attribution.annotate import ATTRIBUTED, annotate, attribute

__all__ = ["ATTRIBUTED", "annotate", "attribute"]
