"""Attribution: which stage of a compiled norm lost the precision (DESIGN §4, README "Attribution").

For a failing execution (inaccurate, dtype_mismatch, nonfinite) on a path
whose intermediates can be read, the compiled graph is re-run with them
exposed (relax: every binding of main as an output; fx: the graph run node
by node), each is matched to the program stage it computes (match.py) and
scored against that stage's FP64 value and bound (harness.program.expand).
Passing executions never come here. Modules: capture (what a reader
returns), relax and fx (the readers), stages (the program of a case),
match (the pairing rule, NumPy only, copied into repro scripts), score (the
entries), annotate (the record keys).
"""
from harness.attribution.annotate import ATTRIBUTED, annotate, attribute

__all__ = ["ATTRIBUTED", "annotate", "attribute"]
