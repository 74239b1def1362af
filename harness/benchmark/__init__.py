"""The oracle's own test: a mutation benchmark of norm implementations (`make oracle-check`).

Correct and deliberately wrong NumPy norms are plugged in as paths
(`implementations`), run over a grid of cases (`grid`) through the real
runner and comparator, and judged against a ground truth that does not come
from the oracle under test (`truth`); the anchors' own oracles score the very
same outputs (`anchors`), and `bench` prints the table.
"""
