"""`normdiff gate`: the five statuses and exit codes on hand-made results, --update, bad baselines."""
import json
import os
from dataclasses import replace

import pytest

from cases.triage import triage
from harness.reports import baseline as gate
from harness.spec import CaseSpec
from helpers import ROOT, SPECS, entry, record, write_baseline, write_results  # noqa: F401

def table_rows(stdout):
    """(status, path, case_id) of each row of the gate table on stdout."""
    rows = []
    for line in stdout.splitlines()[1:]:
        if not line.strip() or line.startswith("total:"):
            continue
        status, path, label = line.split()[:3]
        rows.append((status, path, label.rsplit("-", 1)[1]))
    return rows


# The six kinds of rows: what the results say and what the baseline says.
RESULTS = [record("a", "eager", "pass"),
           record("b", "tvm-decompose", "inaccurate"),      # known, same verdict
           record("c", "executorch-recompose", "inaccurate"),  # not in the baseline
           record("d", "tvm", "error"),                      # known as inaccurate: a different failure
           record("e", "tvm", "pass")]                       # known failure that now passes
BASELINE = [entry("b", "tvm-decompose", "inaccurate", "apache/tvm#20909", "float16 reduction buffers"),
            entry("d", "tvm", "inaccurate", "new", "power on bfloat16"),
            entry("e", "tvm", "nonfinite", "new", "was NaN once"),
            entry("f", "executorch", "crash", "new", "segfaults in the portable kernel")]  # not run


def test_every_status_is_classified_and_the_gate_fails(cli, tmp_path):
    r = cli("gate", write_results(tmp_path, RESULTS), "--baseline", write_baseline(tmp_path, BASELINE), "--verbose")
    assert r.returncode == 1, r.stderr
    got = set(table_rows(r.stdout))
    assert got == {("PASS", "eager", SPECS["a"].case_id),
                   ("XFAIL", "tvm-decompose", SPECS["b"].case_id),
                   ("NEW_FAIL", "executorch-recompose", SPECS["c"].case_id),
                   ("NEW_FAIL", "tvm", SPECS["d"].case_id),
                   ("FIXED", "tvm", SPECS["e"].case_id),
                   ("MISSING", "executorch", SPECS["f"].case_id)}
    assert "total: 1 PASS, 1 XFAIL, 2 NEW_FAIL, 1 FIXED, 1 MISSING" in r.stdout
    assert "apache/tvm#20909: float16 reduction buffers" in r.stdout
    # stderr: one line per problem naming the case, then the totals
    problems = [line for line in r.stderr.splitlines() if line.split()[2:3] in (["NEW_FAIL"], ["FIXED"], ["MISSING"])]
    assert len(problems) == 4
    assert any(SPECS["d"].case_id in p and "expected inaccurate" in p and "got error" in p for p in problems)
    assert any(SPECS["f"].case_id in p and "MISSING" in p for p in problems)
    assert r.stderr.strip().splitlines()[-1].endswith("failing")


def test_as_expected_exits_0_and_hides_pass_rows(cli_here, tmp_path):
    write_results(tmp_path, RESULTS[:2])
    r = cli_here("gate", str(tmp_path), "--baseline", write_baseline(tmp_path, BASELINE[:1]))  # a folder works too
    assert r.returncode == 0, r.stderr
    assert table_rows(r.stdout) == [("XFAIL", "tvm-decompose", SPECS["b"].case_id)]
    assert "total: 1 PASS, 1 XFAIL, 0 NEW_FAIL, 0 FIXED, 0 MISSING" in r.stdout
    # stderr: no problem line, one summary line per status, then the gate's verdict
    lines = r.stderr.strip().splitlines()
    assert len(lines) == len(gate.STATUSES) + 1 and lines[-1].endswith("as expected")
    assert [line.split()[3] for line in lines[:-1]] == list(gate.STATUSES)


@pytest.mark.parametrize("records, entries, status", [
    ([record("c", "tvm", "nonfinite")], [], "NEW_FAIL"),
    ([record("c", "tvm", "timeout")], [entry("c", "tvm", "nonfinite")], "NEW_FAIL"),
    ([record("e", "tvm", "pass")], [entry("e", "tvm", "inaccurate")], "FIXED"),
    ([record("a", "eager", "pass")], [entry("f", "executorch", "crash")], "MISSING"),
])
def test_each_failing_status_alone_exits_1(cli_here, tmp_path, records, entries, status):
    r = cli_here("gate", write_results(tmp_path, records), "--baseline", write_baseline(tmp_path, entries))
    assert r.returncode == 1
    assert status in [row[0] for row in table_rows(r.stdout)]


def test_the_last_record_of_an_execution_wins(cli_here, tmp_path):
    """A resumed or merged file may hold an execution twice: the later record is the result."""
    records = [record("b", "tvm-decompose", "crash"), record("b", "tvm-decompose", "inaccurate")]
    r = cli_here("gate", write_results(tmp_path, records), "--baseline", write_baseline(tmp_path, BASELINE[:1]))
    assert r.returncode == 0, r.stdout + r.stderr


def test_update_keeps_reasons_and_then_the_gate_passes(cli_here, tmp_path):
    base = write_baseline(tmp_path, BASELINE)
    results = write_results(tmp_path, RESULTS)
    r = cli_here("gate", results, "--baseline", base, "--update")
    assert r.returncode == 0, r.stderr
    assert "1 added, 2 removed, 1 re-triaged with a new verdict, 1 of them matched by no triage rule" in r.stderr
    text = (tmp_path / "baseline.json").read_text()
    entries = {(e.case_id, e.path): e for e in gate.parse_baseline(text).values()}
    assert set(entries) == {(SPECS[n].case_id, p) for n, p in
                            (("b", "tvm-decompose"), ("c", "executorch-recompose"), ("d", "tvm"))}
    kept = entries[(SPECS["b"].case_id, "tvm-decompose")]
    assert (kept.verdict, kept.upstream, kept.reason) == ("inaccurate", "apache/tvm#20909", "float16 reduction buffers")
    changed = entries[(SPECS["d"].case_id, "tvm")]  # no rule knows it: the old reason kept, marked untriaged
    assert (changed.verdict, changed.upstream, changed.reason) == (
        "error", "new", "untriaged: now error, was inaccurate: power on bfloat16")
    assert r.stdout.splitlines() == [f"re-triaged tvm {gate.case_label(changed.case, changed.case_id)}: inaccurate -> "
                                     f"error: new: {changed.reason} (no triage rule matches: upstream kept, reason "
                                     "marked untriaged)"]
    added = entries[(SPECS["c"].case_id, "executorch-recompose")]
    assert added.upstream == "new" and added.reason.startswith("untriaged: inaccurate")
    # the written file is the canonical form, so an update with nothing new changes no byte (and re-triages none)
    again = cli_here("gate", results, "--baseline", base, "--update")
    assert again.returncode == 0 and again.stdout == "" and "0 re-triaged" in again.stderr
    assert (tmp_path / "baseline.json").read_text() == text == gate.dump_baseline(entries)
    assert cli_here("gate", results, "--baseline", base).returncode == 0


def test_removing_one_entry_fails_the_gate_naming_that_case(cli_here, tmp_path):
    results = write_results(tmp_path, RESULTS)
    base = str(tmp_path / "fresh.json")  # --update creates a baseline that does not exist yet
    assert cli_here("gate", results, "--baseline", base, "--update").returncode == 0
    assert cli_here("gate", results, "--baseline", base).returncode == 0
    doc = json.loads((tmp_path / "fresh.json").read_text())
    removed = doc["entries"].pop(0)
    (tmp_path / "fresh.json").write_text(json.dumps(doc))
    r = cli_here("gate", results, "--baseline", base)
    assert r.returncode == 1
    (line,) = [line for line in r.stderr.splitlines() if line.startswith("normdiff gate: NEW_FAIL ")]
    assert removed["case_id"] in line and removed["path"] in line


def test_baseline_file_is_sorted_and_diff_friendly():
    entries = gate.parse_baseline(json.dumps({"format": "normdiff-baseline", "version": 1,
                                              "entries": list(reversed(BASELINE))}))
    text = gate.dump_baseline(entries)
    doc = json.loads(text)
    assert doc["format"] == "normdiff-baseline" and doc["version"] == 1
    order = [(e["case"]["pattern"], e["case"]["style"], e["case"]["dtype"], e["case_id"], e["path"])
             for e in doc["entries"]]
    assert order == sorted(order)
    # one key per line and each spec on one line: a changed reason is a one-line diff
    assert sum('"reason":' in line for line in text.splitlines()) == len(BASELINE)
    assert sum('"case": {"pattern"' in line for line in text.splitlines()) == len(BASELINE)
    assert gate.parse_baseline(text) == entries


def _bad(entries=None, **top):
    doc = {"format": "normdiff-baseline", "version": 1, "entries": entries if entries is not None else []}
    doc.update(top)
    return json.dumps(doc)


@pytest.mark.parametrize("text, words", [
    ("{not json", "not valid JSON"),
    ("[]", "expected a JSON object"),
    (_bad(format="something-else"), "'format'"),
    (_bad(version=2), "unsupported version 2"),
    (_bad(colour="red"), "unknown top-level key 'colour'"),
    (_bad(entries={}), "'entries' must be a list"),
    (_bad([{**entry("b", "tvm", "inaccurate"), "reasn": "typo"}]), "unknown key 'reasn'"),
    (_bad([{k: v for k, v in entry("b", "tvm", "inaccurate").items() if k != "reason"}]), "missing key 'reason'"),
    (_bad([entry("b", "tvm", "pass")]), "not a failing verdict"),
    (_bad([entry("b", "tvm", "inaccurate", upstream="tvm 20909")]), "'upstream'"),
    (_bad([entry("b", "tvm", "inaccurate", reason="two\nlines")]), "one line"),
    (_bad([{**entry("b", "tvm", "inaccurate"), "case_id": "000000000000"}]), "does not match its case"),
    (_bad([{**entry("b", "tvm", "inaccurate"), "case": {"pattern": "layer_norm"}}]), "'case'"),
    (_bad([entry("b", "tvm", "inaccurate"), entry("b", "tvm", "error")]), "duplicate entry"),
])
def test_bad_baseline_is_one_line_and_exit_2(capsys, tmp_path, text, words):
    (tmp_path / "bad.json").write_text(text)
    for extra in ([], ["--update"]):  # in this process (an exception would fail the test); the real CLI below
        code, out, err = gate_in_process(capsys, write_results(tmp_path, RESULTS), "--baseline",
                                         str(tmp_path / "bad.json"), *extra)
        assert code == 2, err
        assert len(err) == 1 and words in err[0] and out == ""
    assert (tmp_path / "bad.json").read_text() == text  # --update does not overwrite a bad baseline


def test_a_bad_baseline_on_the_real_command_line_is_one_line_and_no_traceback(cli, tmp_path):
    text = _bad([{**entry("b", "tvm", "inaccurate"), "reasn": "typo"}])
    (tmp_path / "bad.json").write_text(text)
    r = cli("gate", write_results(tmp_path, RESULTS), "--baseline", str(tmp_path / "bad.json"), "--update")
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "unknown key 'reasn'" in r.stderr and "Traceback" not in r.stderr
    assert (tmp_path / "bad.json").read_text() == text


@pytest.mark.parametrize("args, words", [
    (["gate", "/nonexistent/results.jsonl", "--baseline", "b.json"], "no results file"),
    (["gate", "RESULTS"], "--baseline"),
    (["gate", "RESULTS", "--baseline", "/nonexistent/baseline.json"], "cannot read"),
    (["gate", "GARBAGE", "--baseline", "b.json"], "cannot read"),
])
def test_bad_usage_is_one_line_and_exit_2(cli_here, tmp_path, args, words):
    (tmp_path / "garbage.jsonl").write_bytes(bytes(range(128, 256)) * 4)
    args = [write_results(tmp_path, RESULTS) if a == "RESULTS" else
            str(tmp_path / "garbage.jsonl") if a == "GARBAGE" else a for a in args]
    r = cli_here(*args)
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1


# -- --subset, flaky entries, a readable stderr ---------------------------------------------

def gate_in_process(capsys, *args):
    """`normdiff gate …` in this process: (exit code, stdout, stderr lines)."""
    from harness.commands.main import main

    code = main(["gate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err.strip().splitlines()


def test_subset_judges_only_the_entries_the_results_hold(capsys, tmp_path):
    results = write_results(tmp_path, RESULTS[:2])  # a pass and the known failure b
    base = write_baseline(tmp_path, BASELINE)        # also knows d, e and f, which did not run
    code, out, err = gate_in_process(capsys, results, "--baseline", base, "--subset")
    assert code == 0, err
    assert "total: 1 PASS, 1 XFAIL, 0 NEW_FAIL, 0 FIXED, 0 MISSING, 0 FLAKY" in out
    assert any("MISSING" in line and "not judged (--subset): 3 baseline entries not run" in line for line in err)
    assert err[-1].endswith("as expected")
    # without --subset the same results are three MISSING entries and a failing gate
    code, out, err = gate_in_process(capsys, results, "--baseline", base)
    assert code == 1 and "3 MISSING" in out
    assert sum(line.startswith("normdiff gate: MISSING ") for line in err) == 3
    # --subset still judges what ran: a regression among the executions run fails it
    code, _, err = gate_in_process(capsys, write_results(tmp_path, RESULTS), "--baseline", base, "--subset")
    assert code == 1 and any(line.startswith("normdiff gate: NEW_FAIL ") for line in err)


def test_flaky_entries_never_fail_the_gate_and_are_counted(capsys, tmp_path):
    flaky = [{**entry("b", "tvm-decompose", "inaccurate", "new", "passes one night in three"), "flaky": True},
             {**entry("c", "executorch-recompose", "nonfinite", "new", "NaN on some nights"), "flaky": True}]
    results = write_results(tmp_path, [record("b", "tvm-decompose", "pass"),             # flaky, passed
                                       record("c", "executorch-recompose", "inaccurate")])  # flaky, other verdict
    code, out, err = gate_in_process(capsys, results, "--baseline", write_baseline(tmp_path, flaky))
    assert code == 0, err
    assert "0 FIXED, 0 MISSING, 2 FLAKY" in out and "passes one night in three" in out
    assert any(line.split()[2:4] == ["2", "FLAKY"] for line in err)
    rows = {(s, p) for s, p, _ in table_rows(out)}
    assert rows == {("FLAKY", "tvm-decompose"), ("FLAKY", "executorch-recompose")}
    # --update keeps flaky entries (with their mark), whatever the night gave
    gate_in_process(capsys, results, "--baseline", str(tmp_path / "baseline.json"), "--update")
    kept = gate.load_baseline(str(tmp_path / "baseline.json"))
    assert {k[1]: (e.flaky, e.verdict) for k, e in kept.items()} == {
        "tvm-decompose": (True, "inaccurate"), "executorch-recompose": (True, "inaccurate")}
    assert (tmp_path / "baseline.json").read_text().count('"flaky": true') == 2


def test_old_baselines_load_and_round_trip_byte_for_byte(tmp_path):
    """A file written before "flaky" existed loads as is, and --update would not add the key."""
    old = gate.dump_baseline(gate.parse_baseline(json.dumps({"format": "normdiff-baseline", "version": 1,
                                                             "entries": BASELINE})))
    assert '"flaky"' not in old
    entries = gate.parse_baseline(old)
    assert not any(e.flaky for e in entries.values()) and gate.dump_baseline(entries) == old
    committed = gate.load_baseline(os.path.join(ROOT, "reports", "baseline.json"))
    assert len(committed) > 100


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_flaky_must_be_a_boolean(cli_here, tmp_path, value):
    bad = write_baseline(tmp_path, [{**entry("b", "tvm", "inaccurate"), "flaky": value}])
    r = cli_here("gate", write_results(tmp_path, RESULTS), "--baseline", bad)
    assert r.returncode == 2 and "'flaky'" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_stderr_shows_at_most_twenty_problems_then_the_count_of_the_rest(capsys, tmp_path):
    entries = [entry(n, p, "inaccurate") for n in "abcdef" for p in ("tvm", "tvm-decompose", "executorch",
                                                                     "executorch-xnnpack")]
    results = write_results(tmp_path, [record("a", "eager", "pass")])
    code, out, err = gate_in_process(capsys, results, "--baseline", write_baseline(tmp_path, entries))
    assert code == 1 and "24 MISSING" in out
    problems = [line for line in err if line.startswith("normdiff gate: MISSING ")]
    assert len(problems) == 20
    assert "normdiff gate: … and 4 more problems" in "\n".join(err)
    assert any("--subset judges only what ran" in line for line in err)
    assert len(out.splitlines()) == 1 + 24 + 2  # the table on stdout keeps every row


# -- entries of some CPUs' failures ----------------------------------------------------------

def _on(cpu, rec):
    return {**rec, "cpu": cpu}


def test_an_entry_with_cpu_features_holds_only_on_machines_with_one_of_them(capsys, tmp_path):
    """XNNPACK's float16 linear sums in float16 on AVX512-FP16 CPUs only: one baseline serves every runner."""
    base = write_baseline(tmp_path, [{**entry("b", "executorch-xnnpack", "inaccurate", reason="f16 GEMM"),
                                      "cpu": ["avx512_fp16"]}])
    fp16, avx2 = ["f16c", "fma", "avx2", "avx512f", "avx512_fp16"], ["f16c", "fma", "avx2"]
    cases = [  # (the record's cpu, its verdict) -> status, exit code
        ((fp16, "inaccurate"), ("XFAIL", 0)),
        ((fp16, "pass"), ("FIXED", 1)),
        ((avx2, "pass"), ("PASS", 0)),             # not FIXED: on this CPU it never failed
        ((avx2, "inaccurate"), ("NEW_FAIL", 1)),   # a regression where it used to pass
        ((None, "inaccurate"), ("XFAIL", 0)),      # a record that names no CPU may give either
        ((None, "pass"), ("PASS", 0)),
    ]
    for (cpu, verdict), (status, want) in cases:
        results = write_results(tmp_path, [_on(cpu, record("b", "executorch-xnnpack", verdict))])
        code, out, err = gate_in_process(capsys, results, "--baseline", base, "--verbose")
        assert code == want, (cpu, verdict, err)
        assert [s for s, _, _ in table_rows(out)] == [status], (cpu, verdict, out)
    new_here = gate_in_process(capsys, write_results(tmp_path, [_on(avx2, record("b", "executorch-xnnpack",
                                                                                 "inaccurate"))]),
                               "--baseline", base)[1]
    assert "NEW_FAIL" in new_here
    from harness.reports.known import Known  # what summary.md and report.html say of such a record

    known = Known(gate.load_baseline(base))
    assert known.note(_on(avx2, record("b", "executorch-xnnpack", "inaccurate"))) == \
        "new on this CPU (the baseline knows it on CPUs with avx512_fp16)"
    assert known.note(_on(fp16, record("b", "executorch-xnnpack", "inaccurate"))).startswith("known (new)")


def test_update_on_a_machine_without_the_feature_keeps_the_entry_and_writes_cpu_back(capsys, tmp_path):
    listed = {**entry("b", "executorch-xnnpack", "inaccurate", reason="f16 GEMM"), "cpu": ["avx512_fp16"]}
    base = write_baseline(tmp_path, [listed, entry("c", "tvm", "error", reason="importer")])
    results = write_results(tmp_path, [_on(["avx2"], record("b", "executorch-xnnpack", "pass")),
                                       _on(["avx2"], record("c", "tvm", "error"))])
    gate_in_process(capsys, results, "--baseline", base, "--update")
    kept = gate.load_baseline(base)
    assert {k[1]: (e.cpu, e.reason) for k, e in kept.items()} == {
        "executorch-xnnpack": (("avx512_fp16",), "f16 GEMM"), "tvm": ((), "importer")}
    text = (tmp_path / "baseline.json").read_text()
    assert text.count('"cpu": ["avx512_fp16"]') == 1 and gate.dump_baseline(kept) == text
    assert gate_in_process(capsys, results, "--baseline", base)[0] == 0


@pytest.mark.parametrize("value", [[], "avx512_fp16", ["avx512fp16"], [1]])
def test_cpu_must_be_a_list_of_known_features(cli_here, tmp_path, value):
    bad = write_baseline(tmp_path, [{**entry("b", "tvm", "inaccurate"), "cpu": value}])
    r = cli_here("gate", write_results(tmp_path, RESULTS), "--baseline", bad)
    assert r.returncode == 2 and "'cpu'" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_the_committed_zoo_baseline_knows_xnnpack_s_float16_linear_only_on_avx512_fp16():
    zoo = gate.load_baseline(os.path.join(ROOT, "reports", "zoo-baseline.json"))
    with_cpu = [e for e in zoo.values() if e.cpu and e.path == "executorch-xnnpack"]
    assert with_cpu and all(e.cpu == ("avx512_fp16",) for e in with_cpu)


FUSED_ADD = {"pattern": "rms_norm", "dtype": "bfloat16", "shape": [4, 64], "params": {"kind": "normal"},
             "inputs": {"r": {"kind": "normal"}},
             "program": "h = x.float() + r.float()\nv = h.pow(2).mean(-1, keepdim=True)\n"
                        "normed = (h * torch.rsqrt(v + eps)).to(x.dtype) * w\nreturn normed, h.to(x.dtype)"}


def test_an_execution_of_several_outputs_is_known_by_the_outputs_that_fail(capsys, tmp_path, execute_cached):
    records = [execute_cached(FUSED_ADD, p).to_dict() for p in ("eager", "executorch-recompose")]
    assert [r["verdict"] for r in records] == ["pass", "dtype_mismatch"]
    results = write_results(tmp_path, records)
    base = str(tmp_path / "baseline.json")
    gate_in_process(capsys, results, "--baseline", base, "--update")
    (known,) = gate.load_baseline(base).values()
    assert known.outputs == {"normed": "dtype_mismatch"}  # the rebuilt float32 norm; the residual passes
    assert '"outputs": {"normed": "dtype_mismatch"}' in (tmp_path / "baseline.json").read_text()
    code, out, _ = gate_in_process(capsys, results, "--baseline", base)
    assert code == 0 and "1 XFAIL" in out
    # the same verdict, now also on the residual: not the failure the baseline knows
    worse = dict(records[1], outputs=[records[1]["outputs"][0], dict(records[1]["outputs"][1], verdict="inaccurate")])
    code, out, err = gate_in_process(capsys, write_results(tmp_path, [records[0], worse]), "--baseline", base)
    assert code == 1 and "1 NEW_FAIL" in out
    assert any("failing outputs {'normed': 'dtype_mismatch', '1': 'inaccurate'}" in line for line in err)
    # an entry without `outputs` (written before they existed) judges the verdict alone
    (tmp_path / "old.json").write_text(gate.dump_baseline({k: replace(e, outputs=None)
                                                            for k, e in gate.load_baseline(base).items()}))
    code, out, _ = gate_in_process(capsys, write_results(tmp_path, [records[0], worse]), "--baseline",
                                   str(tmp_path / "old.json"))
    assert code == 0 and "1 XFAIL" in out


def test_update_re_triages_an_entry_whose_verdict_changed_from_the_rules(capsys, tmp_path):
    """A changed verdict takes the first matching triage rule's upstream and reason (cases/triage.py), printed one
    line per entry; an unchanged verdict keeps its hand-written reason, even where a rule would say otherwise."""
    base = write_baseline(tmp_path, [
        entry("b", "tvm-decompose", "nonfinite", "new", "NaN once, by hand"),            # now inaccurate: a rule's
        entry("b", "tvm", "inaccurate", "new", "untriaged: inaccurate: 3x the bound"),   # untriaged before and after
        entry("c", "executorch-recompose", "dtype_mismatch", "new", "kept: same verdict")])
    results = write_results(tmp_path, [record("b", "tvm-decompose", "inaccurate"),
                                       record("b", "tvm", "crash", "worker died (SIGSEGV)"),
                                       record("c", "executorch-recompose", "dtype_mismatch")])
    code, out, err = gate_in_process(capsys, results, "--baseline", base, "--update")
    assert code == 0 and "2 re-triaged with a new verdict, 1 of them matched by no triage rule" in err[-1]
    by_path = {e.path: e for e in gate.load_baseline(base).values()}
    ruled = by_path["tvm-decompose"]
    assert (ruled.verdict, ruled.upstream) == ("inaccurate", "apache/tvm#20909")
    assert ruled.reason.startswith("DecomposeOpsForTraining splits layer_norm")
    assert by_path["tvm"].reason == "untriaged: crash: worker died (SIGSEGV)"  # no "was untriaged: …" nesting
    assert by_path["executorch-recompose"].reason == "kept: same verdict"
    lines = out.splitlines()
    label = gate.case_label(ruled.case, ruled.case_id)
    assert lines == [f"re-triaged tvm {label}: inaccurate -> crash: new: untriaged: crash: worker died (SIGSEGV) "
                     "(no triage rule matches: upstream kept, reason marked untriaged)",
                     f"re-triaged tvm-decompose {label}: nonfinite -> inaccurate: apache/tvm#20909: {ruled.reason}"]


def test_update_re_triages_a_real_record_whose_verdict_changed(capsys, tmp_path, execute_cached):
    """A real execution: the fused residual RMSNorm on executorch-recompose, listed with another verdict, is
    re-triaged to RecomposeRmsNorm's report; the entry keeps the outputs that fail."""
    real = execute_cached(FUSED_ADD, "executorch-recompose").to_dict()
    assert real["verdict"] == "dtype_mismatch"
    spec = CaseSpec.from_dict(FUSED_ADD)
    listed = {"case_id": spec.case_id, "path": "executorch-recompose", "verdict": "inaccurate", "upstream": "new",
              "reason": "wrong values, by hand", "case": spec.to_dict()}
    base = write_baseline(tmp_path, [listed])
    code, out, _ = gate_in_process(capsys, write_results(tmp_path, [real]), "--baseline", base, "--update")
    (known,) = gate.load_baseline(base).values()
    assert code == 0 and (known.verdict, known.upstream) == ("dtype_mismatch", "pytorch/executorch#24428")
    assert known.reason == triage(real)[1] and known.outputs == {"normed": "dtype_mismatch"}
    assert out == (f"re-triaged executorch-recompose {gate.case_label(known.case, known.case_id)}: inaccurate -> "
                   f"dtype_mismatch: pytorch/executorch#24428: {known.reason}\n")
    assert gate_in_process(capsys, write_results(tmp_path, [real]), "--baseline", base)[0] == 0
