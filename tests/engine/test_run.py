"""The runner as a nightly gate relies on it: crashes and hangs cost one record,
a killed or interrupted run resumes to every record exactly once, and shards
merge back into the unsharded run.

The misbehaving paths (tests/crashy_paths.py) are eager everywhere except on
their trigger input, so every other record is a real eager execution.
"""
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from harness.core.records import read_results
from harness.spec import CaseSpec
from helpers import CRASHY_PATHS, ROOT, TRIGGER
from helpers import small_layer_norm as ln

ENV = {"NORMDIFF_EXTRA_PATHS": CRASHY_PATHS, "PYTHONPATH": ROOT}
# What depends on timing or on which worker ran what, not on the execution.
SCHEDULING = {"seconds", "prepare_seconds", "run_seconds", "cache_hit"}


def write_cases(tmp_path, specs, name="cases.jsonl"):
    p = tmp_path / name
    p.write_text("".join(json.dumps(s) + "\n" for s in specs))
    return str(p)


def keys(records):
    return Counter((r["case_id"], r["path"]) for r in records)


def expected_keys(specs, paths):
    return {(CaseSpec.from_dict(s).case_id, p) for s in specs for p in paths}


def start_cli(*args, tmp=None):
    """The CLI in its own session, so the test can signal it and all its workers; `tmp`: its TMPDIR,
    where a killed run leaves its workers' log folder and multiprocessing's socket folder.

    It starts with Ctrl-C's default action, as a terminal's foreground job does: a process
    started with SIGINT ignored keeps ignoring it (POSIX, as for a shell's background job),
    and a test process under pytest-xdist may have it ignored (seen in full `make test` runs)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # exec resets a handler to SIG_DFL
    try:
        env = dict(os.environ, **ENV, **({"TMPDIR": str(tmp)} if tmp else {}))
        return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    finally:
        signal.signal(signal.SIGINT, previous)


def wait_for_lines(path, n, proc, limit=120):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if os.path.exists(path) and sum(1 for _ in open(path)) >= n:
            return
        assert proc.poll() is None, f"run ended before {n} records: {proc.communicate()[1][-500:]}"
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} records after {limit} s")


def group_gone(pgid, limit=15):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


# -- crash and timeout --------------------------------------------------------

CRASH_SPECS = [ln(seed=0), ln(input=TRIGGER), ln(seed=1), ln(seed=2),
               {"pattern": "rms_norm", "dtype": "float16", "shape": [2, 16]}]


@pytest.fixture(scope="module")
def crash_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("crash")
    out = tmp / "out"
    r = subprocess.run([sys.executable, "-m", "harness", "run", "--case", write_cases(tmp, CRASH_SPECS),
                        "--paths", "eager,abort,sleep", "--out", str(out), "--jobs", "2", "--timeout", "5"],
                       cwd=ROOT, env=dict(os.environ, **ENV), capture_output=True, text=True, timeout=300)
    records = read_results(str(out / "results.jsonl"))
    return r, records, out


def by_key(records):
    return {(r["case_id"], r["path"]): r for r in records}


@pytest.mark.xdist_group("crash_run")  # its module fixture once, on one worker
def test_abort_is_a_crash_record_and_every_other_record_is_there(crash_run):
    r, records, out = crash_run
    assert r.returncode == 1, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    assert keys(records) == Counter(expected_keys(CRASH_SPECS, ["eager", "abort", "sleep"]))
    trigger = CaseSpec.from_dict(ln(input=TRIGGER)).case_id
    table = by_key(records)
    crash = table[(trigger, "abort")]
    assert crash["verdict"] == "crash" and crash["signal"] == "SIGABRT"
    assert "SIGABRT" in crash["message"] and "misbehave" in crash["message"]  # faulthandler's stack
    assert any("crashy_paths.py" in line for line in crash["log_tail"])
    # The rest of the crashed group ran on a fresh worker and is a real result, equal to eager's.
    for s in CRASH_SPECS:
        cid = CaseSpec.from_dict(s).case_id
        if cid == trigger:
            continue
        for path in ("abort", "sleep"):
            rec, eager = table[(cid, path)], table[(cid, "eager")]
            assert rec["verdict"] == "pass" == eager["verdict"]
            assert rec["max_abs_err"] == eager["max_abs_err"] and rec["out_dtype"] == eager["out_dtype"]
    assert table[(trigger, "eager")]["verdict"] == "pass"
    assert "crash" in (out / "summary.md").read_text()


@pytest.mark.xdist_group("crash_run")  # its module fixture once, on one worker
def test_a_hang_is_a_timeout_record(crash_run):
    r, records, _ = crash_run
    trigger = CaseSpec.from_dict(ln(input=TRIGGER)).case_id
    hung = by_key(records)[(trigger, "sleep")]
    assert hung["verdict"] == "timeout" and "5 s" in hung["message"]
    assert 5 <= hung["seconds"] < 60
    assert Counter(x["verdict"] for x in records) == {"pass": len(records) - 2, "crash": 1, "timeout": 1}


# -- killed, interrupted, resumed ---------------------------------------------

SLOW_SPECS = [ln(seed=i) for i in range(10)] + [
    {"pattern": "rms_norm", "dtype": "float16", "shape": [2, 16], "seed": i} for i in range(10)]


def started_run(tmp_path, paths: str, records: int):
    """(cases file, out folder, results file, the CLI process) of a run of SLOW_SPECS past `records` records."""
    cases = write_cases(tmp_path, SLOW_SPECS)
    out = tmp_path / "out"
    results = str(out / "results.jsonl")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = start_cli("run", "--case", cases, "--paths", paths, "--out", str(out), "--jobs", "2", tmp=scratch)
    wait_for_lines(results, records, proc)
    return cases, out, results, proc


def test_sigkilled_run_resumes_with_every_record_once(tmp_path):
    cases, out, results, proc = started_run(tmp_path, "slow,eager", 6)
    os.killpg(proc.pid, signal.SIGKILL)  # the parent, its forkserver and its workers, mid-run
    proc.wait(30)
    proc.communicate()
    assert group_gone(proc.pid)
    before = open(results).read()
    assert 6 <= len(before.splitlines()) < 40
    with open(results, "a") as fh:  # as if it had died in the middle of writing a record
        fh.write('{"case_id": "torn", "path": "sl')

    r = subprocess.run([sys.executable, "-m", "harness", "run", "--case", cases, "--paths", "slow,eager",
                        "--out", str(out), "--jobs", "2", "--resume", "--quiet"],
                       cwd=ROOT, env=dict(os.environ, **ENV), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    after = open(results).read()
    assert after.startswith(before)  # nothing finished before the kill was redone or lost
    lines = after.splitlines()
    assert all(json.loads(line) for line in lines)  # the torn line is gone
    assert keys(read_results(results)) == Counter(expected_keys(SLOW_SPECS, ["slow", "eager"]))


def test_ctrl_c_stops_cleanly_keeping_what_finished(tmp_path):
    _, out, results, proc = started_run(tmp_path, "slow", 3)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends the whole foreground group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "interrupted" in err and "--resume" in err
    assert group_gone(proc.pid)  # no worker left behind
    kept = read_results(results)
    assert 3 <= len(kept) < len(SLOW_SPECS)
    assert sum(1 for _ in open(results)) == len(kept)  # every line whole
    assert (out / "summary.md").exists() and f"{len(kept)} executions" in (out / "summary.md").read_text()


# -- shards -------------------------------------------------------------------

SHARD_SPECS = ([ln(seed=i) for i in range(3)]
               + [ln(dtype="float16", input={"kind": "uniform", "low": -2, "high": 2}, seed=i) for i in range(3)]
               + [{"pattern": "rms_norm", "style": s, "dtype": "bfloat16", "shape": [2, 32]}
                  for s in ("module", "llama", "gemma")]
               + [{"pattern": "group_norm", "dtype": "float16", "shape": [2, 4, 3], "groups": 2, "seed": i}
                  for i in range(2)])


def test_two_shards_merged_equal_the_unsharded_run(cli, tmp_path):
    cases = write_cases(tmp_path, SHARD_SPECS)
    common = ["--case", cases, "--paths", "eager", "--jobs", "1", "--quiet"]
    outs = {name: tmp_path / name for name in ("all", "s1", "s2", "merged")}
    assert cli("run", *common, "--out", str(outs["all"])).returncode == 0
    for k in (1, 2):
        r = cli("run", *common, "--shard", f"{k}/2", "--out", str(outs[f"s{k}"]))
        assert r.returncode == 0, r.stderr[-2000:]
    r = cli("merge", str(outs["s1"]), str(outs["s2"]), "--out", str(outs["merged"]))
    assert r.returncode == 0, r.stderr[-2000:]

    def strip(records):
        return sorted((json.dumps({k: v for k, v in rec.items() if k not in SCHEDULING}, sort_keys=True)
                       for rec in records))

    s1, s2 = (read_results(str(outs[f"s{k}"] / "results.jsonl")) for k in (1, 2))
    assert s1 and s2 and not set(keys(s1)) & set(keys(s2))
    assert abs(len(s1) - len(s2)) <= 3
    merged = read_results(str(outs["merged"] / "results.jsonl"))
    assert strip(merged) == strip(read_results(str(outs["all"] / "results.jsonl")))
    assert [(x["case_id"], x["path"]) for x in merged] == sorted((x["case_id"], x["path"]) for x in merged)
    assert (outs["merged"] / "summary.md").exists()


@pytest.mark.parametrize("args, words", [
    (["merge", "/nonexistent-dir"], "no results.jsonl"),
    (["run", "--jobs", "-1", "--paths", "eager"], "--jobs"),
    (["run", "--timeout", "0", "--paths", "eager"], "--timeout"),
])
def test_bad_runner_usage_is_one_line_exit_2(cli_here, args, words):
    r = cli_here(*args)
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1
