"""The pool of warm workers (one lane per path): artifacts reused, a crash or a killed idle worker replaced."""
import os
import signal

from helpers import CRASHY_PATHS, ROOT, TRIGGER
from helpers import small_layer_norm as ln

from harness.spec import CaseSpec


def test_pool_reuses_artifacts_per_path_and_survives_a_crash(monkeypatch):
    from harness.engine.plan import Task
    from harness.engine.pool import Pool

    monkeypatch.setenv("NORMDIFF_EXTRA_PATHS", CRASHY_PATHS)
    monkeypatch.syspath_prepend(ROOT)
    a, b, bad = (CaseSpec.from_dict(s) for s in (ln(seed=0), ln(seed=1), ln(input=TRIGGER)))
    with Pool(["eager", "abort"], timeout=60) as pool:
        first = pool.map([Task(a, "eager"), Task(a, "abort")])
        assert [r["path"] for r in first] == ["eager", "abort"] and all(r["verdict"] == "pass" for r in first)
        again = pool.submit(b, "abort")
        assert again["verdict"] == "pass" and again["cache_hit"]  # same structure, same lane: reused
        crashed = pool.submit(bad, "abort")
        assert crashed["verdict"] == "crash" and crashed["signal"] == "SIGABRT"
        after = pool.submit(b, "abort")  # a fresh worker took over the lane
        assert after["verdict"] == "pass" and not after["cache_hit"]
        assert after["max_abs_err"] == again["max_abs_err"]
        idle = pool.lanes["eager"].process
        os.kill(idle.pid, signal.SIGKILL)  # dies between tasks (an OOM kill, say)
        idle.join(10)
        late = pool.submit(b, "eager")  # not blamed on the next task: a new worker runs it
        assert late["verdict"] == "pass" and late["max_abs_err"] == after["max_abs_err"]


def test_a_task_may_leave_out_the_attribution(monkeypatch):
    """A caller that needs only verdicts (fuzz, while it searches and shrinks) spares the failing
    executions their attribution (a rebuild of the path's graph); the default keeps it."""
    from harness.engine.plan import Task
    from harness.engine.pool import Pool

    monkeypatch.setenv("NORMDIFF_EXTRA_PATHS", "wrong=harness.benchmark.implementations:WeightDropped")
    spec = CaseSpec.from_dict(ln(params={"kind": "normal"}))
    with Pool(["wrong"], timeout=60) as pool:
        plain, attributed = pool.map([Task(spec, "wrong", attribute=False), Task(spec, "wrong")])
    assert plain["verdict"] == attributed["verdict"] == "inaccurate"
    assert "attribution" not in plain and "attribution_seconds" not in plain
    assert "attribution" in attributed and attributed["facts"]["attribution"]  # read, or why not
    assert plain["max_abs_err"] == attributed["max_abs_err"]
