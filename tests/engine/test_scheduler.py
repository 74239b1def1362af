"""The scheduler: a long group of one structure is split across idle workers, only when that pays."""
import time
from collections import Counter

from helpers import CRASHY_PATHS, ROOT
from helpers import small_layer_norm as ln

from harness.engine.run import run
from harness.spec import CaseSpec


def test_a_long_group_is_split_across_idle_workers(tmp_path, monkeypatch):
    specs = [CaseSpec.from_dict(ln(seed=i)) for i in range(16)]  # one structure: one group of 16
    monkeypatch.setenv("NORMDIFF_EXTRA_PATHS", CRASHY_PATHS)
    monkeypatch.syspath_prepend(ROOT)
    start = time.monotonic()
    records = run(specs, ["slow"], str(tmp_path), jobs=2, progress=False)
    took = time.monotonic() - start
    assert Counter((r["case_id"], r["path"]) for r in records) == Counter((s.case_id, "slow") for s in specs)
    assert all(r["verdict"] == "pass" for r in records)
    misses = sum(not r["cache_hit"] for r in records)
    assert 2 <= misses <= 3  # split, but not into pieces smaller than a compile is worth
    assert took < 60
