"""docs/contracts.md cannot fall behind the code: its op table is the op table of harness/program/ops.py, spelling
for spelling; its path names are the registry's, its verdicts and gate statuses the enums', its spec keys and input
kinds the spec's vocabulary, its command options the parser's; and every key a real record holds is documented."""
from __future__ import annotations

import argparse
import glob
import os
import re

import pytest

from harness import paths
from harness.commands.main import build_parser
from harness.core.verdicts import VERDICTS, Status
from harness.program import grammar, ops
from harness.spec.keys import INPUT_KINDS, KEYS, PROGRAM_KEYS
from harness.spec.mode_keys import MODE_KEYS
from harness.spec.module_keys import MODULE_KEYS
from helpers import ROOT

CONTRACTS = os.path.join(ROOT, "docs", "contracts.md")
TICKED = re.compile(r"`([^`]+)`")


def text() -> str:
    with open(CONTRACTS, encoding="utf-8") as fh:
        return fh.read()


def section(number: int) -> str:
    """The body of `## §N.` up to the next section."""
    match = re.search(rf"^## §{number}\. .*?$(.*?)(?=^## §|\Z)", text(), re.S | re.M)
    assert match, f"docs/contracts.md has no section §{number}"
    return match.group(1)


def first_column(body: str) -> dict[str, str]:
    """{the ticked name in a table row's first cell: the rest of the row}."""
    rows = {}
    for line in body.splitlines():
        m = re.match(r"^\| `([^`]+)` \|(.*)$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_the_sections_keep_their_numbers():
    titles = re.findall(r"^## §(\d+)\. (.+)$", text(), re.M)
    assert [int(n) for n, _ in titles] == list(range(1, len(titles) + 1))
    topics = {int(n): t for n, t in titles}
    for number, topic in {1: "spec", 2: "Paths", 3: "Verdicts", 4: "record", 5: "Command line", 6: "plug-in",
                          7: "programs", 8: "Module cases", 9: "zoo"}.items():
        assert topic in topics[number], (number, topics[number])


# -- §7: the op table, spelling for spelling -------------------------------------------------------------------
def op_rows() -> dict[str, str]:
    return first_column(section(7).partition("The op table")[2])


def spellings(row: str) -> tuple[set[str], set[str], set[str]]:
    """(torch.NAME functions, F.NAME functions, t.NAME methods) a row of the op table shows."""
    return (set(re.findall(r"\btorch\.(\w+)\(", row)), set(re.findall(r"\bF\.(\w+)\(", row)),
            set(re.findall(r"\bt\.(\w+)\(", row)))


def test_the_op_list_is_the_op_table():
    assert list(op_rows()) == [op.name for op in ops.TABLE]


@pytest.mark.parametrize("op", [op.name for op in ops.TABLE])
def test_each_op_row_shows_exactly_the_spellings_the_parser_takes(op):
    functions, functional, methods = spellings(op_rows()[op])
    assert functions == {f for f, o in grammar.FUNCTIONS.items() if o == op}, op
    assert functional == {f for f, o in grammar.FUNCTIONAL.items() if o == op}, op
    casts = set(grammar.CASTS) | {"to", "type_as"}
    assert methods == {m for m in grammar.METHODS if m == op or (op == "cast" and m in casts)}, op


def test_the_operators_are_the_parsers():
    rows = op_rows()
    for node, op in grammar.BINOPS.items():
        operator = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}[op]
        assert f" {operator} " in rows[op], op


def test_each_row_spelling_parses():
    """Every concrete spelling of the op table, with its placeholders filled in, is a program the parser takes."""
    from harness.program.parse import parse

    fill = {"t": "x", "u": "x", "a": "x", "b": "x", "k": "2", "DIM": "-1", "B": "True", "C": "0",
            "normalized_shape": "[x.shape[-1]]", "weight": "w", "bias": "b", "eps": "eps", "num_groups": "1",
            "d": "0", "dim": "0", "start": "0", "length": "1", "sizes": "x.shape[0], -1", "dims": "1, 0",
            "DTYPE": "torch.float32", "K": "2", "S": "1", "P": "0", "A": "1.0"}
    dims = {"a": "0", "b": "1"}  # transpose's a and b are dims, not tensors
    for op, row in op_rows().items():
        for snippet in TICKED.findall(row):
            if "…" in snippet or ("[" in snippet and op != "index"):
                continue  # an elision, or an optional argument
            names = {**fill, **dims} if op == "transpose" else fill
            source = re.sub(r"\b[A-Za-z_]+\b", lambda m: names.get(m.group(0), m.group(0)), snippet)
            parse(f"return {source}")


# -- §2, §3, §11: names ------------------------------------------------------------------------------------------
def test_the_path_table_is_the_registry():
    """Compared with the registry at test time: a path added to REGISTRY needs its row here."""
    assert list(first_column(section(2))) == paths.default_names()


def test_the_verdict_table_is_the_enum():
    assert list(first_column(section(3))) == list(VERDICTS)


def test_the_gate_statuses_are_the_enum():
    assert list(first_column(section(11).partition("| status |")[2])) == [s.value for s in Status]


# -- §1, §7, §8: the spec's vocabulary ---------------------------------------------------------------------------
def test_the_spec_tables_hold_every_key():
    assert list(first_column(section(1).partition("Input objects")[0])) == list(KEYS) + list(MODE_KEYS)
    assert set(PROGRAM_KEYS) <= set(first_column(section(7).partition("The op table")[0]))
    assert set(MODULE_KEYS) <= set(first_column(section(8)))


def test_the_input_kinds_and_their_defaults_are_the_specs():
    paragraph = section(1).partition("Input objects")[2].partition("\n\n")[0].replace("\n", " ")
    shown = {}
    for kind, params in re.findall(r"`(\w+)` \(([^)]*)\)", paragraph):
        shown[kind] = {name: float(value.replace("−", "-"))
                       for name, value in re.findall(r"`(\w+)` (−?[\d.e-]+)", params)}
    assert shown == INPUT_KINDS


# -- §5: the command line -----------------------------------------------------------------------------------------
def subparsers(parser) -> dict[str, argparse.ArgumentParser]:
    action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return dict(action.choices) if action else {}


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command, a nested one as "zoo list" (in place of "zoo")."""
    out = {}
    for name, parser in subparsers(build_parser()).items():
        nested = {f"{name} {sub}": p for sub, p in subparsers(parser).items()}
        out.update(nested or {name: parser})
    return out


def test_every_command_is_in_the_table():
    listed = {TICKED.search(line).group(1).split(" [")[0].split(" --")[0]
              for line in section(5).splitlines() if line.startswith("| `")}
    listed = {" ".join(w for w in name.split() if w.islower()) for name in listed}
    assert listed == set(commands())


@pytest.mark.parametrize("command", sorted(commands()))
def test_every_option_of_every_command_is_documented(command):
    body = section(5)
    for action in commands()[command]._actions:
        for option in action.option_strings:
            if option in ("-h", "--help") or (option.startswith("-") and not option.startswith("--")):
                continue
            assert re.search(rf"`[^`]*{re.escape(option)}\b", body), f"{command} {option} is not in §5"


# -- §4: the record -----------------------------------------------------------------------------------------------
def documented_record_keys() -> set[str]:
    keys = set()
    for line in section(4).splitlines():
        if line.startswith("| `"):
            keys |= set(TICKED.findall(line.split("|")[1]))
    keys |= set(TICKED.findall(section(4).partition("Once the case's reference exists")[2].partition("Added")[0]))
    return keys


def test_every_documented_record_key_is_written_by_the_code():
    """The reverse of the test below, for the keys only some records carry: each is a name the code writes."""
    source = "".join(open(f, encoding="utf-8").read() for f in glob.glob(os.path.join(ROOT, "harness", "**", "*.py"),
                                                                       recursive=True))
    for key in documented_record_keys():
        assert re.search(rf"(?<!\w){key}(?!\w)", source), f"§4 documents {key!r}, which no code writes"


def test_every_key_of_a_real_record_is_documented(tmp_path):
    """The records of a catalog case, a module case and one of two outputs on eager, run in this process."""
    import harness

    records = harness.check([{"pattern": "layer_norm", "dtype": "float16", "shape": [2, 32]},
                             {"class": "user_norms:LlamaRMSNorm", "init": {"hidden_size": 32}, "dtype": "bfloat16",
                              "shape": [2, 32]},
                             {"class": "user_norms:FusedAddRMSNorm", "init": {"hidden_size": 32}, "dtype": "bfloat16",
                              "shape": [2, 32], "inputs": {"residual": {"kind": "normal"}}}],
                            paths=["eager"], jobs=0, out=str(tmp_path), cache=False)
    assert [r["verdict"] for r in records] == ["pass", "pass", "pass"] and "outputs" in records[2]
    undocumented = {k for r in records for k in r} - documented_record_keys()
    assert not undocumented, f"record keys missing from docs/contracts.md §4: {sorted(undocumented)}"


def test_every_option_of_the_pytest_plugin_is_documented():
    """§12 against the options the plugin registers (read from its source: importing it registers nothing)."""
    with open(os.path.join(ROOT, "harness", "pytest_plugin.py"), encoding="utf-8") as fh:
        registered = set(re.findall(r"addoption\(\s*\"(--normdiff-[\w-]+)\"", fh.read()))
    assert registered and registered == set(re.findall(r"`(--normdiff-[\w-]+)", section(12)))
