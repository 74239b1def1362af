"""README.md and docs/ cannot drift from the code: every `normdiff …` they show parses with the real parser
and names suites, paths, bugs, classes and files that exist; every spec they show is a valid spec; every docs
page is linked from the README and opens by saying what it is for; every relative link resolves; no page sends
the reader outside the repository; docs/layout.md names every module; the README stays short. A few of the README's commands are run as a newcomer
would run them."""
from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import re
import shlex
import unicodedata

import pytest

from cases.bugs import BUGS
from cases.suites import suite, suite_names
from harness import paths
from harness.commands.main import build_parser
from harness.spec import CaseSpec
from helpers import ROOT

README = os.path.join(ROOT, "README.md")
DOCS = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
PAGES = [README, *DOCS]
README_MAX_LINES = 220
PAGE_MAX_LINES = 400
# docs/contracts.md holds every contract as tables (wave 5 added the backward's and symbolic shapes'); the pages that
# explain stay within PAGE_MAX_LINES
CONTRACTS_MAX_LINES = 520
# docs/measurements.md is a dated log: every wave appends its figures with their commits
MEASUREMENTS_MAX_LINES = 800
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
INLINE = re.compile(r"`(normdiff [^`]+)`")
ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")
SEPARATORS = {"&&", "||", "|", ";", ">", "2>&1"}
PLACEHOLDER = re.compile(r"^\[|…|^[A-Z][A-Z_]*$")  # [--flag], …, FILE: a synopsis, not a call


def text(page: str) -> str:
    with open(page, encoding="utf-8") as fh:
        return fh.read()


def rel(page: str) -> str:
    return os.path.relpath(page, ROOT)


def blocks(page: str, lang: str | None = None) -> list[str]:
    """The fenced code blocks of a page (of one language: "" for plain blocks)."""
    return [body for tag, body in FENCE.findall(text(page)) if lang is None or tag == lang]


def calls(line: str) -> list[tuple[dict, list[str]]]:
    """Each `normdiff …` of a shell line: (its environment assignments, its arguments after `normdiff`)."""
    out = []
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        return out
    segment: list[str] = []
    for tok in tokens + [";"]:
        if tok not in SEPARATORS:
            segment.append(tok)
            continue
        env = {}
        while segment and ENV.match(segment[0]):
            name, _, value = segment.pop(0).partition("=")
            env[name] = value
        if segment and segment[0] in ("normdiff", ".venv/bin/normdiff"):
            out.append((env, segment[1:]))
        segment = []
    return out


def shown_calls(page: str) -> list[tuple[dict, list[str]]]:
    """Every normdiff call in a page's plain code blocks; a synopsis with placeholders (`[--flag]`, `…`,
    FILE) is not a call."""
    lines = [ln for body in blocks(page, "") for ln in body.splitlines()]
    return [(env, argv) for line in lines for env, argv in calls(line)
            if not any(PLACEHOLDER.search(t) for t in argv)]


def mentioned(page: str) -> list[list[str]]:
    """Every `normdiff …` in a page's running text (often a fragment: `normdiff run --case`)."""
    return [argv for span in INLINE.findall(text(page).replace("\n", " ")) for _, argv in calls(span)]


README_CALLS = shown_calls(README)
DOC_CALLS = [(rel(p), env, argv) for p in DOCS for env, argv in shown_calls(p)]
BUG_IDS = {b.id for b in BUGS}


def options_of(argv: list[str]) -> set[str] | None:
    """The option strings of the (sub)command `argv` starts with; None when it names no command."""
    parser = build_parser()
    for word in argv[:2]:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or word not in sub.choices:
            break
        parser = sub.choices[word]
    else:
        pass
    if parser.prog == "normdiff":
        return None
    return {o for a in parser._actions for o in a.option_strings}


def check_call(env: dict, argv: list[str]) -> None:
    """The call parses with normdiff's parser, and what it names exists."""
    args = build_parser().parse_args(argv)  # a UsageError (an option renamed or removed) fails the test
    extra = {n for item in env.get("NORMDIFF_EXTRA_PATHS", "").split(",") if "=" in item
             for n in [item.split("=", 1)[0]]}
    for name in (getattr(args, "paths", None) or "").split(","):
        assert not name or name in paths.names() or name in extra, f"unknown path {name!r} in {argv}"
    suites = getattr(args, "suite", None) or []
    for name in [suites] if isinstance(suites, str) else suites:
        assert name in suite_names(), f"unknown suite {name!r} in {argv}"
    for folder in env.get("PYTHONPATH", "").split(os.pathsep):
        assert not folder or folder.startswith("path/") or os.path.isdir(os.path.join(ROOT, folder)), folder
    named = list(getattr(args, "case", None) or [])
    if args.command == "repro":
        target = args.target
        if target.endswith((".json", ".jsonl")):
            named.append(target)
        elif not re.fullmatch(r"[0-9a-f]{12}", target):
            assert target in BUG_IDS, f"repro {target}: not a catalog bug id"
    if args.command == "gate" and not args.update:
        named.append(args.baseline)
    for path in named:  # files of the checkout (user-written files live outside cases/ and reports/)
        if path.startswith(("cases/", "reports/baseline", "tests/")):
            assert os.path.exists(os.path.join(ROOT, path)), f"{path} does not exist ({argv})"
    cls = getattr(args, "cls", None)
    if cls and cls.startswith("user_norms:"):
        source = ast.parse(text(os.path.join(ROOT, "tests", "user_norms.py")))
        assert cls.partition(":")[2] in {n.name for n in source.body if isinstance(n, ast.ClassDef)}, cls


def test_the_readme_is_short():
    assert len(text(README).splitlines()) <= README_MAX_LINES


def test_the_docs_name_nothing_outside_the_repository():
    """A user has the repository only: the contracts are docs/contracts.md, linked from the README."""
    assert "docs/contracts.md" in {t.partition("#")[0] for t in LINK.findall(text(README))}
    for page in PAGES:
        body = text(page)
        for target in re.findall(r"(?:\.\./)+[\w./-]*", body):
            dest = os.path.normpath(os.path.join(os.path.dirname(page), target))
            assert dest.startswith(ROOT + os.sep), f"{rel(page)} names {target}, outside the repository"
        assert "DESIGN" not in body and "/shared/" not in body, f"{rel(page)} cites a file outside the repository"


def test_the_readme_shows_every_use():
    commands = {argv[0] for _, argv in README_CALLS}
    assert {"run", "gate", "fuzz", "repro", "bugs", "lift"} <= commands
    runs = [argv for _, argv in README_CALLS if argv[0] == "run"]
    assert any("--class" in a for a in runs) and any("--subset" in a for _, a in README_CALLS)
    assert any(a[:1] == ["repro"] and "tvm-20909" in a for _, a in README_CALLS)
    body = text(README)
    for name in paths.default_names():
        assert f"| `{name}` |" in body, f"the README's paths table lacks {name}"
    assert "make run" in body and "make test" in body


@pytest.mark.parametrize("env, argv", README_CALLS, ids=[" ".join(a)[:60] for _, a in README_CALLS])
def test_every_readme_command_parses_and_names_what_exists(env, argv):
    check_call(env, argv)


@pytest.mark.parametrize("page, env, argv", DOC_CALLS, ids=[f"{p}: {' '.join(a)[:50]}" for p, _, a in DOC_CALLS])
def test_every_docs_command_parses_and_names_what_exists(page, env, argv):
    check_call(env, argv)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_command_mentioned_in_the_text_exists_with_its_options(page):
    for argv in mentioned(page):
        options = options_of(argv)
        assert options is not None, f"{rel(page)}: `normdiff {' '.join(argv)}`: no such command"
        for tok in argv:
            if tok.startswith("--"):
                assert tok.split("=")[0] in options, f"{rel(page)}: `normdiff {' '.join(argv)}`: no option {tok}"


def test_every_make_target_the_readme_names_exists():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as fh:
        targets = set(re.findall(r"^([a-z][\w-]*):", fh.read(), re.M))
    for page in PAGES:
        named = set(re.findall(r"\bmake ([a-z][\w-]*)", text(page)))
        assert named <= targets, f"{rel(page)}: no make target {sorted(named - targets)}"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_spec_shown_is_a_valid_spec(page):
    for body in blocks(page, "json"):
        raw = json.loads(body)
        for spec in raw if isinstance(raw, list) else [raw]:
            CaseSpec.from_dict(spec)  # a SpecError names the key


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_python_example_parses(page):
    for body in blocks(page, "python"):
        ast.parse(body)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {os.path.normpath(os.path.join(ROOT, t.partition("#")[0])) for t in LINK.findall(text(README))}
    assert DOCS, "docs/ holds the documentation"
    for page in DOCS:
        assert os.path.normpath(page) in linked, f"{rel(page)} is not linked from README.md"


@pytest.mark.parametrize("page", DOCS, ids=rel)
def test_every_docs_page_says_what_it_is_for_and_stays_readable(page):
    lines = text(page).splitlines()
    limit = {"contracts.md": CONTRACTS_MAX_LINES, "measurements.md": MEASUREMENTS_MAX_LINES}.get(os.path.basename(page),
                                                                                            PAGE_MAX_LINES)
    assert lines[0].startswith("# ") and len(lines) <= limit
    opening = next(ln for ln in lines[1:] if ln.strip())
    assert not opening.startswith(("#", "```", "|", "*", "-")), f"{rel(page)} opens without saying what it is for"
    assert re.search(r"\bpage\b", " ".join(lines[1:12])), f"{rel(page)}: its opening should say what the page is for"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    s = heading.strip().lower().replace("`", "")
    s = "".join(c for c in s if c in " -_" or unicodedata.category(c)[0] in "LN")
    return s.replace(" ", "-")


def anchors(page: str) -> set[str]:
    body = FENCE.sub("", text(page))
    return {slug(h) for h in re.findall(r"^#+ (.+)$", body, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_relative_link_resolves(page):
    for target in LINK.findall(FENCE.sub("", text(page))):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), file)) if file else page
        assert os.path.exists(dest), f"{rel(page)}: {target} does not resolve"
        if anchor and dest.endswith(".md"):
            assert anchor in anchors(dest), f"{rel(page)}: no heading #{anchor} in {rel(dest)}"


def test_the_suite_table_counts_what_the_suites_hold():
    """docs/cases.md's counts of cases and structures, for the suites that build in a second."""
    table = dict(re.findall(r"^\| `(\w+)` \| ([\d,]+ \([\d,]+ structures\)) \|", text(os.path.join(ROOT, "docs", "cases.md")),
                            re.M))
    for name in ("smoke", "nearmiss", "nightly"):
        specs = suite(name)
        shown = table[name].replace(",", "")
        assert shown == f"{len(specs)} ({len({s.structure_key() for s in specs})} structures)", name


def test_the_docs_listing_of_the_smoke_suite_runs(capsys):
    """`normdiff cases --suite smoke --programs` (docs/cases.md), through the command line's own main."""
    from harness.commands.main import main

    assert main(["cases", "--suite", "smoke", "--programs"]) == 0
    printed = [CaseSpec.from_dict(json.loads(line)) for line in capsys.readouterr().out.splitlines()]
    assert len(printed) == len(suite("smoke")) and any(s.style == "program" for s in printed)


def test_the_readmes_lift_runs_on_the_users_class(cli):
    """The README's `lift` line as it stands, with its PYTHONPATH: a ready program spec on stdout."""
    ((env, argv),) = [(e, a) for e, a in README_CALLS if a[0] == "lift"]
    r = cli(*argv, env={k: os.path.join(ROOT, v) for k, v in env.items()})
    assert r.returncode == 0, r.stderr
    printed = CaseSpec.from_dict(json.loads(r.stdout))
    assert printed.style == "program" and "rsqrt" in printed.program


def layout_tree() -> dict[str, str]:
    """docs/layout.md's tree: {folder ("harness/core", "cases"): the text of its entry}."""
    (tree,) = [b for b in blocks(os.path.join(ROOT, "docs", "layout.md"), "") if b.startswith("Makefile")]
    entries: dict[str, str] = {}
    current = None
    for line in tree.splitlines():
        m = re.match(r"^( {0,2})(\S+)/\s", line)
        if m:
            current = ("harness/" if m.group(1) else "") + m.group(2)
            entries[current] = line
        elif current and line.startswith(" " * 15):
            entries[current] += " " + line.strip()
    return entries


def test_the_layout_names_every_module_of_the_tree():
    """docs/layout.md says what each package holds: every module of harness/ and cases/ is named in its entry."""
    tree = layout_tree()
    packages = [p for p in glob.glob(os.path.join(ROOT, "harness", "*", "")) if glob.glob(os.path.join(p, "*.py"))]
    for folder in [*packages, os.path.join(ROOT, "cases", "")]:
        entry = tree[os.path.relpath(folder, ROOT)]
        for module in glob.glob(os.path.join(folder, "*.py")):
            name = os.path.basename(module)[:-3]
            if name != "__init__":
                assert re.search(rf"(?<![\w.]){name}\b", entry), f"docs/layout.md: {rel(module)} is not named"


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_file_of_the_checkout_a_page_names_exists(page):
    """A module renamed or moved is renamed in the pages that cite it (x/y.py and my_compiler.py are examples)."""
    for name in set(re.findall(r"\b(?:harness|cases|tests)/[\w/]+\.py\b", text(page))):
        if not re.search(r"\b(?:x/|y\.py|test_y\.py|my_compiler\.py)", name):
            assert os.path.exists(os.path.join(ROOT, name)), f"{rel(page)} names {name}, which does not exist"
