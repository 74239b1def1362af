"""A path's pasted pipeline cut to what one case runs (the short script's, harness.repro.short_script).

A path pastes its own functions (`script_code`), which serve every case: a
gradient and a forward one, a symbolic and a static one, bfloat16 and not,
each call's options. A short script is read whole, so it keeps only the
lines its case reaches, by the source's own structure (never a rewritten
copy):

* forward_only / backward_only: a forward case drops the `if
  is_backward(model):` branches; a gradient case keeps only that branch of
  `run_path` (its model is always the Backward); where that branch reads of
  the Backward only its norm and count of inputs (norm_only: TVM
  differentiates `vjp_target(model.forward_module, …)` itself), no function
  is given a Backward and the rest is forward_only too;
* static_only: a static case drops the symbolic branches (`if dynamic…`)
  and the size-oblivious tracing;
* without_bfloat16: a case with no bfloat16 tensor drops the branches taken
  on a bfloat16 dtype (an `if` or `… if … else …` testing `== bfloat16`);
* fold_constants: a function every call gives the same literal for a
  parameter (`turbine_mlir(model, example, None, None)`) drops the branches
  that literal never takes;
* prune: only the functions the statements reach; tight: no blank lines.
"""
from __future__ import annotations

import ast
import re


def used_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _cut(code: str, drop: set[int], dedent: dict[int, int] | None = None) -> str:
    """`code` without the lines `drop` (1-based), the lines of `dedent` shifted left by their count of columns."""
    dedent = dedent or {}
    return "\n".join(line[dedent.get(i, 0):] for i, line in enumerate(code.split("\n"), 1) if i not in drop)


def _asks_backward(test: ast.AST) -> bool:
    """A test that holds only for a gradient case: is_backward(…), alone or in an `and`."""
    calls = [test] if not isinstance(test, ast.BoolOp) or not isinstance(test.op, ast.And) else test.values
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "is_backward" for c in calls)


def forward_only(code: str) -> str:
    """`code` without the branches a forward case never takes (`if is_backward(model): …` with no else): a
    path's pipeline runs gradient cases too, and a forward case's short script has no line of them."""
    drop: set[int] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.If) and not node.orelse and _asks_backward(node.test):
            drop.update(range(node.lineno, node.end_lineno + 1))
    return _cut(code, drop)


def _take(node: ast.If, after: list[ast.stmt], drop: set[int], dedent: dict[int, int]) -> None:
    """Keep `node`'s body in its place (its test line dropped, its lines dedented) and, where the body returns,
    drop the statements after it (`after`): the branch a case always takes."""
    drop.update(range(node.lineno, node.body[0].lineno))
    shift = node.body[0].col_offset - node.col_offset
    dedent.update({i: shift for i in range(node.body[0].lineno, node.end_lineno + 1)})
    if isinstance(node.body[-1], (ast.Return, ast.Raise)):
        for stmt in after:
            drop.update(range(stmt.lineno, stmt.end_lineno + 1))


def backward_only(code: str) -> str:
    """`code` with `run_path` cut to its gradient branch (`if is_backward(model): … return …`): a gradient
    case's model is always normdiff's Backward, so the forward lines after that branch never run. Other
    functions keep their tests (they are called with other modules too: TVM's vjp target)."""
    drop: set[int] = set()
    dedent: dict[int, int] = {}
    for fn in ast.parse(code).body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "run_path":
            for k, node in enumerate(fn.body):
                if isinstance(node, ast.If) and not node.orelse and _asks_backward(node.test) and len(
                        node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]) == 1:
                    _take(node, fn.body[k + 1:], drop, dedent)
                    break
    return _cut(code, drop, dedent)


def norm_only(code: str) -> bool:
    """Whether `run_path` (after backward_only) reads its model only as `model.forward_module` and
    `model.n_inputs`: the path differentiates the norm itself and hands the Backward to no function."""
    fn = next((n for n in ast.parse(code).body if isinstance(n, ast.FunctionDef) and n.name == "run_path"), None)
    if fn is None:
        return False
    reads = {id(n.value) for n in ast.walk(fn) if isinstance(n, ast.Attribute) and n.attr in ("forward_module", "n_inputs")}
    uses = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == "model"]
    return bool(uses) and all(id(n) in reads for n in uses)


def static_only(code: str) -> str:
    """`code` without its symbolic branches, for a static case (DYNAMIC is None): every `if` testing the name
    `dynamic` without an else (the pipeline keeps what only a symbolic compile runs in such blocks), and every
    `with` of the size-oblivious tracing (a re-trace that keeps a symbolic range) left for its body; prune then
    drops what they alone called (symbolic_export, marked_dynamic, partial_shapes…)."""
    drop: set[int] = set()
    dedent: dict[int, int] = {}
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.If) and not node.orelse and "dynamic" in used_names(node.test):
            drop.update(range(node.lineno, node.end_lineno + 1))
        elif isinstance(node, ast.With) and all("backed_size_oblivious" in ast.unparse(w) for w in node.items):
            drop.update(range(node.lineno, node.body[0].lineno))
            dedent.update({i: 4 for i in range(node.body[0].lineno, node.end_lineno + 1)})
    return _cut(code, drop, dedent)


def _is_bfloat16(test: ast.AST) -> bool:
    """A test that holds only on a bfloat16 dtype: `… == …bfloat16…`, alone or in an `and`."""
    parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    return any(isinstance(p, ast.Compare) and len(p.ops) == 1 and isinstance(p.ops[0], ast.Eq)
               and "bfloat16" in ast.unparse(p) for p in parts)


def _branches(code: str, decide) -> str:
    """`code` with each `if` and one-line `a if test else b` whose test `decide` settles (True/False, None:
    unknown) cut to the branch it takes: the other's lines dropped, the taken one's dedented in place."""
    tree = ast.parse(code)
    lines = code.split("\n")
    drop: set[int] = set()
    dedent: dict[int, int] = {}
    swaps: dict[int, list[tuple[int, int, str]]] = {}
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (taken := decide(node.test)) is not None:
            block = parents.get(node)
            body = next((getattr(block, f) for f in ("body", "orelse", "finalbody")
                         if node in getattr(block, f, [])), [])
            after = body[body.index(node) + 1:] if node in body else []
            if taken:
                _take(node, after, drop, dedent)
                if node.orelse:
                    drop.update(range(node.orelse[0].lineno - 1, node.end_lineno + 1))  # `else:` and its body
                    drop.difference_update(range(node.body[0].lineno, node.body[-1].end_lineno + 1))
            elif node.orelse and not (len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If)
                                      and node.orelse[0].col_offset == node.col_offset):
                drop.update(range(node.lineno, node.orelse[0].lineno))
                shift = node.orelse[0].col_offset - node.col_offset
                dedent.update({i: shift for i in range(node.orelse[0].lineno, node.end_lineno + 1)})
            elif not node.orelse:
                drop.update(range(node.lineno, node.end_lineno + 1))
        elif (isinstance(node, ast.IfExp) and node.lineno == node.end_lineno
              and (taken := decide(node.test)) is not None):
            kept = node.body if taken else node.orelse
            text = ast.get_source_segment(code, kept)
            if kept.lineno == kept.end_lineno and not isinstance(kept, (ast.IfExp, ast.Lambda)):
                swaps.setdefault(node.lineno, []).append((node.col_offset, node.end_col_offset, text))
    for i, edits in swaps.items():  # from the right: earlier columns stay valid
        for start, end, text in sorted(edits, reverse=True):
            lines[i - 1] = lines[i - 1][:start] + text + lines[i - 1][end:]
    return _cut("\n".join(lines), drop, dedent)


def without_bfloat16(code: str) -> str:
    """`code` without the branches taken on a bfloat16 dtype, for a case with no bfloat16 tensor."""
    return _branches(code, lambda test: False if _is_bfloat16(test) else None)


def _constants(tree: ast.Module) -> dict[str, dict[str, object]]:
    """Per top-level function, the parameters every call (by name, positional or keyword) gives one same
    literal (or a top-level name set once to one: DYNAMIC, TARGET_CPU), or leaves at its literal default; a
    function named anywhere but in a call has none."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    stores = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    named = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and (
                stores.count(n.targets[0].id) == 1):
            try:
                named[n.targets[0].id] = ast.literal_eval(n.value)
            except ValueError:  # not a literal
                pass
    calls: dict[str, list[ast.Call]] = {name: [] for name in defs}
    called = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defs:
            calls[node.func.id].append(node)
            called.add(id(node.func))
    loose = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in defs and id(n) not in called}
    found: dict[str, dict[str, object]] = {}
    for name, fn in defs.items():
        if name in loose or not calls[name] or fn.args.vararg or fn.args.kwonlyargs:
            continue
        params = [a.arg for a in fn.args.args]
        defaults = dict(zip(params[len(params) - len(fn.args.defaults):], fn.args.defaults))
        values: dict[str, set] = {p: set() for p in params}
        for call in calls[name]:
            if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                values = {}
                break
            given = {**dict(zip(params, call.args)), **{k.arg: k.value for k in call.keywords}}
            for p in params:
                node = given.get(p, defaults.get(p))
                values[p].add(repr(node.value) if isinstance(node, ast.Constant) else
                              repr(named[node.id]) if isinstance(node, ast.Name) and node.id in named else None)
        found[name] = {p: ast.literal_eval(v.pop()) for p, v in values.items() if len(v) == 1 and None not in v}
    return found


def _settle(test: ast.AST, known: dict[str, object]):
    """True/False where `test` reads only known parameters (`p`, `not p`, `p is None`, `p == 'x'`, …)."""
    if any(isinstance(n, ast.Name) and n.id not in known for n in ast.walk(test)) or any(
            isinstance(n, (ast.Call, ast.Attribute, ast.Subscript)) for n in ast.walk(test)):
        return None
    try:
        return bool(eval(compile(ast.Expression(test), "<test>", "eval"), {"__builtins__": {}}, dict(known)))
    except Exception:  # a test of a literal that does not evaluate alone: left as it is
        return None


def fold_constants(code: str) -> str:
    """`code` with each function's branches settled by the literals every call passes it (a test before the
    function first sets the parameter): what a case's `run_path` fixes (`exported=None`, a decompose of '')."""
    tree = ast.parse(code)
    constants = _constants(tree)
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or not constants.get(fn.name):
            continue
        stores: dict[str, int] = {}  # a parameter is its literal up to the line that first sets it (of `part`)
        for n in ast.walk(fn):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                stores[n.id] = min(stores.get(n.id, n.lineno), n.lineno) - fn.lineno + 1
        known = constants[fn.name]
        lines = code.split("\n")
        start, end = fn.lineno - 1, fn.end_lineno
        part = "\n".join(lines[start:end])
        folded = _branches(part, lambda test: _settle(test, {p: v for p, v in known.items()
                                                           if test.end_lineno < stores.get(p, end + 1)}))
        if folded != part:
            code = "\n".join([*lines[:start], folded, *lines[end:]])
            return fold_constants(code)  # line numbers moved: parse again
    return code


def prune(code: str, roots: tuple[str, ...] = ()) -> str:
    """`code` with only the top-level functions and classes its other statements (and `roots`) reach, one
    blank line apart."""
    tree = ast.parse(code)
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}  # the last wins
    keep: set[str] = set()
    todo = [*roots, *(name for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.ClassDef)) for name in used_names(n))]
    while todo:
        name = todo.pop()
        if name in defs and name not in keep:
            keep.add(name)
            todo.extend(used_names(defs[name]))
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and defs[node.name] is not node or (
                node in defs.values() and node.name not in keep):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            drop.update(range(start, node.end_lineno + 1))
    return re.sub(r"\n{3,}", "\n\n", _cut(code, drop)).strip("\n") + "\n"


def tight(code: str) -> str:
    """`code` without blank lines: a short script is read top to bottom, its sections marked by their `# --`
    lines (every line counts: a report's script is at most a screenful, the seed's 60 lines)."""
    return "\n".join(line for line in code.split("\n") if line.strip()) + "\n"


def joined(code: str, width: int = 200) -> str:
    """`code` with each simple statement written over several lines (a call's arguments wrapped) on one line
    where it fits `width` and no comment sits inside it: the same tokens, fewer lines."""
    import io
    import tokenize

    comments = {t.start[0] for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type == tokenize.COMMENT}
    lines = code.split("\n")
    spans = []
    for node in ast.walk(ast.parse(code)):
        if (isinstance(node, ast.stmt) and not hasattr(node, "body") and node.end_lineno > node.lineno
                and not comments & set(range(node.lineno, node.end_lineno))):
            spans.append((node.lineno, node.end_lineno))
    for start, end in sorted(spans, reverse=True):
        text = lines[start - 1].rstrip()
        for line in lines[start:end]:
            part = line.strip()
            text = text[:-1].rstrip() if text.endswith("\\") else text
            glue = "" if text.endswith(("(", "[", "{")) or part.startswith((")", "]", "}")) else " "
            text += glue + part
        if len(text) <= width:
            lines[start - 1:end] = [text]
    return "\n".join(lines)


def hoisted(code: str) -> tuple[str, list[str]]:
    """`code` without the imports its functions make in their own bodies (normdiff imports a library where it
    is used, so that importing harness stays light), and those imports, for the script's top: each plain
    `import a.b as c` (the script's imports are one line), and a `from` import two functions make. One whose
    name another import binds differently stays where it is."""
    tree = ast.parse(code)
    found: dict[str, list[ast.stmt]] = {}
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef):
            for node in fn.body:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    found.setdefault(ast.unparse(node), []).append(node)
    binds: dict[str, set[str]] = {}
    for text, nodes in found.items():
        for alias in nodes[0].names:
            binds.setdefault(alias.asname or alias.name.split(".")[0], set()).add(text)
    top = [text for text, nodes in found.items()
           if (isinstance(nodes[0], ast.Import) or len(nodes) > 1)
           and all(len(binds[a.asname or a.name.split(".")[0]]) == 1 for a in nodes[0].names)]
    drop = {n.lineno for text in top for n in found[text]}
    return _cut(code, drop), top


def inline_identities(code: str) -> str:
    """`code` where a top-level function came (after fold_constants) to `return <one of its parameters>`: each
    call of it written as that argument, and the function gone (`decomposed(mod, '')` is `mod`)."""
    tree = ast.parse(code)
    for fn in tree.body:
        body = [n for n in getattr(fn, "body", [])[1 if isinstance(fn, ast.FunctionDef) and ast.get_docstring(fn) else 0:]
                if not isinstance(n, (ast.Import, ast.ImportFrom))]  # its docstring and imports aside
        if not (isinstance(fn, ast.FunctionDef) and len(body) == 1 and isinstance(body[0], ast.Return)
                and isinstance(body[0].value, ast.Name)):
            continue
        params = [a.arg for a in fn.args.args]
        if body[0].value.id not in params or fn.args.vararg or fn.args.kwonlyargs:
            continue
        k = params.index(body[0].value.id)
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id == fn.name]
        names = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == fn.name]
        if len(names) != len(calls) or not all(len(c.args) > k and c.lineno == c.end_lineno and not c.keywords
                                               for c in calls):
            continue
        lines = code.split("\n")
        for c in sorted(calls, key=lambda c: (c.lineno, -c.col_offset)):  # inner calls first, right to left
            line = lines[c.lineno - 1]
            lines[c.lineno - 1] = line[:c.col_offset] + ast.get_source_segment(code, c.args[k]) + line[c.end_col_offset:]
            code = "\n".join(lines)
            return inline_identities(_cut(code, set(range(fn.lineno, fn.end_lineno + 1)))) if len(calls) == 1 else \
                inline_identities(code)
    return code


def one_line_ifs(code: str, width: int = 200) -> str:
    """`code` with each `if test:` whose body is one simple statement (no else, each on one line) written as
    `if test: statement` where it fits `width`."""
    lines = code.split("\n")
    joins = {}
    for node in ast.walk(ast.parse(code)):
        if (isinstance(node, ast.If) and not node.orelse and len(node.body) == 1
                and not hasattr(node.body[0], "body") and node.lineno == node.test.end_lineno
                and node.body[0].lineno == node.body[0].end_lineno == node.lineno + 1):
            head, tail = lines[node.lineno - 1][:node.test.end_col_offset], lines[node.lineno - 1][node.test.end_col_offset:]
            comment = tail.strip().removeprefix(":").strip()  # the `if` line's own comment, kept at the end
            body = lines[node.lineno]
            if tail.strip().startswith(":") and (not comment or comment.startswith("#") and "#" not in body):
                joins[node.lineno] = f"{head}: {body.strip()}" + (f"  {comment}" if comment else "")
    for i, text in sorted(joins.items(), reverse=True):
        if len(text) <= width:
            lines[i - 1:i + 1] = [text]
    return "\n".join(lines)
