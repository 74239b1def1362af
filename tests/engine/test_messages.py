"""What crosses a worker's pipe is plain picklable data: the config, a task, and a record back, unchanged."""
import multiprocessing as mp

from harness.core.verdicts import Verdict
from harness.engine.execute import failed
from harness.engine.messages import Done, Ready, Started, TaskMessage, WorkerConfig
from harness.spec import CaseSpec

SPEC = CaseSpec.from_dict({"pattern": "rms_norm", "dtype": "bfloat16", "shape": [2, 8]})


def test_config_task_and_record_cross_a_pipe_unchanged():
    cfg = WorkerConfig(extra_paths="", sys_path=("/x",), warm=("harness.engine.warm",), cache={"root": "/c"},
                       log="/tmp/w.log", max_memory=2**31)
    record = failed(SPEC, "tvm", Verdict.CRASH, message="worker died (SIGSEGV)", seconds=1.5, signal="SIGSEGV")
    here, there = mp.Pipe()
    try:
        for msg in (cfg, TaskMessage(True, SPEC.to_dict(), "tvm", False), Ready(1), Started(12), Done(record)):
            here.send(msg)
            assert there.recv() == msg
    finally:
        here.close()
        there.close()
    assert Done(record).record["verdict"] == "crash" and Done(record).record.verdict is Verdict.CRASH
