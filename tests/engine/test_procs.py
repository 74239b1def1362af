"""The worker processes seen from the parent: the hint a killed worker gets, and where a crash's stack begins."""
from harness.engine.procs import Procs


def test_a_killed_worker_is_told_the_memory_limit_may_be_why():
    procs = Procs(["eager"], 5.0, max_memory=4)
    try:  # a worker killed outright (the kernel's OOM killer) says the limit may be why
        assert "memory limit of 4 GB" in procs._memory_hint(-9, [])
        assert "memory limit of 4 GB" in procs._memory_hint(-6, ["terminate called after throwing std::bad_alloc"])
        assert procs._memory_hint(-6, ["Fatal Python error: Aborted"]) == ""
    finally:
        procs.close([])


def _next(procs, w, timeout=60.0):
    """check(w) until it says something."""
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        procs.wait([w])
        kind, payload = procs.check(w)
        if kind:
            return kind, payload
    raise AssertionError("the worker said nothing")


def test_a_busy_worker_holds_the_next_task_and_a_crash_leaves_it_unstarted(monkeypatch):
    """A task sent behind the current one is started as soon as the current record is sent; a worker
    that dies on the current one leaves the queued one in `queued`, never blamed (the scheduler reruns it)."""
    from helpers import CRASHY_PATHS, ROOT, TRIGGER
    from helpers import small_layer_norm as ln

    from harness.engine.plan import Task
    from harness.spec import CaseSpec

    monkeypatch.setenv("NORMDIFF_EXTRA_PATHS", CRASHY_PATHS)
    monkeypatch.syspath_prepend(ROOT)
    first, second, trigger = (CaseSpec.from_dict(ln(seed=1)), CaseSpec.from_dict(ln(seed=2)),
                              CaseSpec.from_dict(ln(input=TRIGGER)))
    procs = Procs(["abort"], 60.0, start_method="fork")
    w = procs.start()
    try:
        while not w.ready:  # check() takes the worker's "ready" and says nothing
            procs.wait([w])
            assert procs.check(w) == ("", None)
        assert procs.send(w, Task(first, "abort"), True) and procs.send(w, Task(second, "abort"), False)
        assert w.task.spec == first and [t.spec for t in w.queued] == [second]
        kind, record = _next(procs, w)
        assert (kind, record["case_id"]) == ("record", first.case_id)
        assert w.task.spec == second and not w.queued  # the next one is the current one now
        assert _next(procs, w)[1]["case_id"] == second.case_id and w.task is None

        assert procs.send(w, Task(trigger, "abort"), False) and procs.send(w, Task(first, "abort"), False)
        kind, record = _next(procs, w)
        assert (kind, record["verdict"], record["case_id"]) == ("failed", "crash", trigger.case_id)
        assert [t.spec for t in w.queued] == [first]  # sent, never started: for the scheduler to run again
    finally:
        procs.close([w], graceful=False)


def test_a_queued_task_that_crashes_before_its_predecessor_is_read_keeps_its_stack(monkeypatch):
    """The worker starts the queued task as soon as it sends the current record: if that task crashes before
    the parent reads the record, its faulthandler stack is already in the log. The crash record still carries
    it: the worker's "started" says where the task's output begins. (Forked from pytest, the stack is too deep
    for the record's few-KB tail, so this reads the log from that offset; test_run checks the message.)"""
    import time

    from helpers import CRASHY_PATHS, ROOT, TRIGGER
    from helpers import small_layer_norm as ln

    from harness.engine.plan import Task
    from harness.spec import CaseSpec

    monkeypatch.setenv("NORMDIFF_EXTRA_PATHS", CRASHY_PATHS)
    monkeypatch.syspath_prepend(ROOT)
    first, trigger = CaseSpec.from_dict(ln(seed=1)), CaseSpec.from_dict(ln(input=TRIGGER))
    procs = Procs(["abort"], 60.0, start_method="fork")
    w = procs.start()
    try:
        while not w.ready:
            procs.wait([w])
            assert procs.check(w) == ("", None)
        assert procs.send(w, Task(first, "abort"), True) and procs.send(w, Task(trigger, "abort"), False)
        end = time.monotonic() + 60
        while w.process.is_alive() and time.monotonic() < end:  # both ran before the parent read anything
            time.sleep(0.05)
        kind, record = procs.check(w)
        assert (kind, record["case_id"]) == ("record", first.case_id)
        kind, crash = procs.check(w)
        assert (kind, crash["verdict"], crash["case_id"]) == ("failed", "crash", trigger.case_id)
        with open(w.log, encoding="utf-8", errors="replace") as fh:  # what the record's tail is read from
            since = fh.read()[w.log_offset:]
        assert "Fatal Python error: Aborted" in since and "misbehave" in since, (w.log_offset, since[-500:])
    finally:
        procs.close([w], graceful=False)
