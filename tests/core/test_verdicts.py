"""The verdicts are defined once: no verdict string outside harness/core/verdicts.py (tests and JSON aside).

Every module of harness/ and cases/ is parsed (ast, nothing imported) and
each string constant is checked: one equal to a verdict is a second
definition of it, and so is a quoted verdict inside a longer string (an SQL
fragment such as "verdict = 'pass'"). The few constants that spell a
verdict's word with another meaning are listed below, each with its reason.
"""
import ast
import pathlib

import pytest

from harness.core.verdicts import VERDICTS, Verdict

ROOT = pathlib.Path(__file__).resolve().parents[2]
HOME = "harness/core/verdicts.py"
# (module, string): why it is not a verdict there.
NOT_VERDICTS = {
    ("harness/engine/cache.py", "unsupported"): "the cache's own status Origin.UNSUPPORTED (a record's artifact_cache)",
    ("harness/program/grammar.py", "pass"): "the name of Python's `pass` statement, in the program language's errors",
    ("harness/reports/junit.py", "error"): "JUnit's <error> element",
    ("harness/commands/fuzz_campaign.py", "timeout"): "a campaign file's `timeout` key",
}


def _sources():
    for top in ("harness", "cases"):
        for p in sorted((ROOT / top).rglob("*.py")):
            yield p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")


def _docstrings(tree) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def verdict_literals(name: str, text: str) -> list[str]:
    """'module:line: value' for each verdict string constant of one module's source."""
    tree = ast.parse(text)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
            continue
        value = node.value
        if value in VERDICTS and (name, value) not in NOT_VERDICTS:
            found.append(f"{name}:{node.lineno}: {value!r}")
        elif value not in VERDICTS and any(f"'{v}'" in value for v in VERDICTS):
            found.append(f"{name}:{node.lineno}: a quoted verdict in {value[:60]!r}")
    return found


def test_no_verdict_literal_outside_core_verdicts():
    found = [hit for name, text in _sources() if name != HOME for hit in verdict_literals(name, text)]
    assert not found, "use harness.core.verdicts.Verdict:\n" + "\n".join(found)


def test_every_exception_is_still_there():
    """An exception whose constant went away is dropped from the list, so the list cannot rot."""
    texts = dict(_sources())
    for (name, value), why in NOT_VERDICTS.items():
        tree = ast.parse(texts[name])
        assert any(isinstance(n, ast.Constant) and n.value == value for n in ast.walk(tree)), (name, value, why)


@pytest.mark.parametrize("snippet, hits", [
    ('if r["verdict"] == "pass": pass', 1),
    ('x = {"crash": 1}', 1),
    ('q = "SELECT SUM(verdict = \'pass\') FROM t"', 1),
    ('def f():\n    """Docstrings may say "error" and \'pass\' in prose."""', 0),
    ("from harness.core.verdicts import Verdict\nok = Verdict.PASS", 0),
    ('stage = "compile"', 0),
])
def test_the_scan_finds_a_literal(snippet, hits):
    assert len(verdict_literals("harness/x.py", snippet)) == hits


def test_a_verdict_is_its_string():
    assert Verdict.PASS == "pass" and {"inaccurate": 1}[Verdict.INACCURATE] == 1
    assert VERDICTS == tuple(v.value for v in Verdict)
