"""Nothing imports upward: every import of harness/ and cases/ against the layers of the house.

The layers, bottom to top (docs/layout.md, the working rules):

    core, program, spec, oracle, paths, modules, attribution, engine, reports, repro, search, benchmark, commands

A module of harness/<layer>/ may import its own layer and the layers below
it, never one above. Every import counts: module-level, function-level
(lazy imports too), under `if TYPE_CHECKING:`, absolute or relative.
Beside them:

* `cases/` is data written in the spec's terms (the suites, the seeds'
  variants, the bug catalog, the triage rules): it may import core,
  program, spec, the zoo and itself, and every layer above spec may read it.
* `harness/zoo/` is a source of cases too (a model library's norm classes,
  read from their source files, as module specs): it ranks with `cases/`.
* `harness/__init__.py` imports nothing of the project.
* `harness/pytest_plugin.py`, `harness/__main__.py` and `harness/api.py`
  are entry points on top of everything: they may import any layer (the
  plug-in reads the gate and the runner, `python -m harness` the command
  line, `harness.check` the runner); nothing imports them.

The modules are parsed with `ast`, never imported.
"""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAYERS = ("core", "program", "spec", "oracle", "paths", "modules", "attribution", "engine", "reports", "repro",
          "search", "benchmark", "commands")
TOP = len(LAYERS)            # the entry points
CASES = LAYERS.index("spec")  # cases ranks with the spec: it may import up to spec, and spec's readers read it
ENTRY_POINTS = ("harness.pytest_plugin", "harness.__main__", "harness.api")


def modules() -> dict[str, pathlib.Path]:
    out = {}
    for top in ("harness", "cases"):
        for p in sorted((ROOT / top).rglob("*.py")):
            name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = p
    return out


def rank(module: str) -> float | None:
    """The module's layer as a number (higher is above); None: not a project module."""
    parts = module.split(".")
    if parts[0] == "cases" or parts[:2] == ["harness", "zoo"]:
        return CASES + 0.5  # beside spec: above it (it reads it), below oracle (which may read it)
    if parts[0] != "harness":
        return None
    if module in ENTRY_POINTS:
        return TOP
    if len(parts) == 1:
        return -1  # harness/__init__.py: below everything, so it may import nothing of the project
    if parts[1] not in LAYERS:
        raise AssertionError(f"{module}: not in a layer; place it in one (or name it here)")
    return LAYERS.index(parts[1])


def imported(module: str, path: pathlib.Path, known) -> set[str]:
    """The project modules `module` imports, anywhere in its source."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                out.add(name)
    return out


def upward_imports() -> list[str]:
    mods = modules()
    found = []
    for module, path in mods.items():
        mine = rank(module)
        for other in sorted(imported(module, path, mods)):
            theirs = rank(other)
            if other.startswith(module + "."):
                continue  # a package's __init__ importing its own modules
            if theirs is not None and theirs > mine:
                found.append(f"{module} imports {other}")
    return found


def test_nothing_imports_a_layer_above_its_own():
    assert not upward_imports(), "upward imports:\n" + "\n".join(upward_imports())


def test_every_module_has_a_layer():
    for module in modules():
        rank(module)  # raises for a module outside the layers


def test_the_rule_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "harness" / "core"
    pkg.mkdir(parents=True)
    (pkg / "x.py").write_text("def f():\n    from harness.engine import run\n    from ..paths import base\n")
    known = {"harness.core.x", "harness.engine", "harness.engine.run", "harness.paths", "harness.paths.base"}
    assert imported("harness.core.x", pkg / "x.py", known) == {"harness.engine", "harness.engine.run",
                                                               "harness.paths", "harness.paths.base"}
    assert rank("harness.engine.run") > rank("harness.core.x")
    assert rank("cases.suites") > rank("harness.spec.case") and rank("cases.suites") < rank("harness.oracle.inputs")
