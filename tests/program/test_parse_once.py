"""A program is parsed once per process: over the nightly suite's program cases, catalog cases and module cases
executed in-process by the engine's Executor (as a worker runs them), each program text is parsed at most
once, and executing a case parses nothing its spec or its lift already holds as IR."""
import json
from importlib import import_module

from cases.suites import suite
from harness.engine.execute import Executor
from harness.spec import CaseSpec

parse_module = import_module("harness.program.parse")  # the module (harness.program.parse is the function)

MODULE_CASES = [
    {"pattern": "rms_norm", "class": "user_norms:LlamaRMSNorm", "init": {"hidden_size": 64}, "dtype": "bfloat16",
     "shape": [2, 8, 64], "params": {"kind": "normal"}},
    {"class": "user_norms:GatedRMSNorm", "init": {"hidden_size": 64}, "dtype": "float16", "shape": [2, 8, 64],
     "inputs": {"gate": {"kind": "normal"}}},
    {"class": "torch.nn:GroupNorm", "init": {"num_groups": 2, "num_channels": 8}, "dtype": "float32",
     "shape": [2, 8, 3, 3]},
]


def _forget_parses():
    parse_module._parse.cache_clear()
    parse_module.PARSES.clear()


def test_each_program_is_parsed_once_and_executing_a_case_parses_nothing_it_holds():
    nightly = suite("nightly")
    programs = [s for s in nightly if s.program is not None]
    catalog = [s for s in nightly if s.program is None][::25]  # every style, dtype and cast, sampled
    assert len({s.program for s in programs}) > 10 and {s.style for s in catalog} >= {"module", "qwen", "gemma"}
    raws = [json.loads(s.to_json()) for s in programs + catalog] + MODULE_CASES

    _forget_parses()  # as a fresh worker: the specs arrive as JSON
    specs = [CaseSpec.from_dict(raw) for raw in raws]
    assert set(parse_module.PARSES) == {s.program for s in programs}
    assert max(parse_module.PARSES.values()) == 1  # 86 cases over fewer texts: each text once

    _forget_parses()  # what executing parses, with nothing kept from the specs' parses
    executor = Executor()
    records = [executor.execute(spec, "eager") for spec in specs]
    assert all(r["verdict"] in ("pass", "fail") for r in records), [r["message"] for r in records
                                                                     if r["verdict"] not in ("pass", "fail")]
    lifted = {r["program"] for r in records[-len(MODULE_CASES):]}
    assert len(lifted) == len(MODULE_CASES)
    parsed = parse_module.PARSES
    assert not set(parsed) & {s.program for s in programs}, "a consumer parsed a program its spec carries"
    assert not set(parsed) & lifted, "a lifted program was parsed: the lifter builds it as IR"
    assert parsed and max(parsed.values()) == 1  # the catalog styles' programs (and group_norm's), each once
