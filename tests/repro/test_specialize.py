"""harness/repro/specialize.py: a path's pasted pipeline cut to the lines one case runs.

Each cut keeps the source's own text (dropped lines, dedented blocks, a branch for its `if`); the scripts that
use them are run by tests/repro/test_report.py and `bugs --check` (tests/commands/test_bugs.py).
"""
from __future__ import annotations

import ast

from harness.repro.specialize import (backward_only, fold_constants, forward_only, hoisted, inline_identities, joined,
                                      norm_only, one_line_ifs, prune, static_only, without_bfloat16)


def test_prune_keeps_what_the_statements_reach_and_the_last_definition_of_a_name():
    code = ("def a():\n    return b()\n\n\ndef b():\n    return 1\n\n\ndef b():\n    return 2\n\n\n"
            "def unused():\n    return a()\n\n\nprint(a())\n")
    assert prune(code) == "def a():\n    return b()\n\ndef b():\n    return 2\n\nprint(a())\n"
    assert prune("def a():\n    return 1\n\n\ndef b():\n    return 2\n", ("b",)) == "def b():\n    return 2\n"


def test_a_forward_case_drops_the_gradient_branches_and_a_gradient_case_keeps_only_them():
    code = ("def run_path(model, x):\n    if is_backward(model):  # a gradient case\n        y = grad(model, x)\n"
            "        return y\n    if ready and is_backward(model):\n        pass\n    return model(x)\n")
    assert forward_only(code) == "def run_path(model, x):\n    return model(x)\n"
    assert backward_only(code) == "def run_path(model, x):\n    y = grad(model, x)\n    return y\n"
    other = code.replace("run_path", "export")  # called with other modules too: its tests stay
    assert backward_only(other) == other


def test_a_run_path_reading_only_the_backwards_norm_hands_the_backward_to_no_function():
    tvm = ("def run_path(model, example, x):\n    mod = target(export(vjp(model.forward_module, model.n_inputs), example))\n"
           "    return run(gradient(mod, model.n_inputs), x)\n")
    assert norm_only(tvm)
    assert not norm_only("def run_path(model, example, x):\n    return run(export(model, example), x)\n")
    assert not norm_only(tvm.replace("vjp(model.forward_module", "vjp(model, model.forward_module"))
    assert not norm_only("def other(model):\n    return model.forward_module\n")  # no run_path


def test_a_static_case_drops_the_symbolic_branches():
    code = ("def f(m, dynamic):\n    if dynamic:\n        return sym(m)\n"
            "    with cfg.patch(backed_size_oblivious=True):\n        return m\n")
    assert static_only(code) == "def f(m, dynamic):\n    return m\n"


def test_a_case_without_bfloat16_drops_what_only_bfloat16_takes():
    code = ("def run(a):\n    if a.dtype == ml_dtypes.bfloat16:  # its words\n        a = words(a)\n"
            "    if a.dtype != ml_dtypes.bfloat16:\n        keep(a)\n"
            "    return a.view(np.uint16) if str(a.dtype) == 'bfloat16' else a.copy()\n")
    assert without_bfloat16(code) == ("def run(a):\n    if a.dtype != ml_dtypes.bfloat16:\n        keep(a)\n"
                                      "    return a.copy()\n")


def test_the_literals_every_call_passes_settle_a_functions_branches():
    code = ("def mlir(m, exported=None, dynamic=None):\n    if exported is None and dynamic:\n"
            "        exported = export(m)\n    if exported is None:\n        return plain(m)\n    return run(exported)\n"
            "def dec(mod, name):\n    return apply(name, mod) if name else mod\n"
            "TOP = None\n"
            "def run_path(m):\n    return dec(mlir(m, None, TOP), '')\n")
    folded = fold_constants(code)
    assert "export(m)" not in folded and "run(exported)" not in folded and "    return plain(m)\n" in folded
    assert "    return mod\n" in folded
    inlined = inline_identities(folded)
    assert "def dec" not in inlined and "    return mlir(m, None, TOP)" in inlined
    # a parameter some call gives another value (or a name) is not settled
    twice = code + "def other(m):\n    return mlir(m, m)\n"
    assert "run(exported)" in fold_constants(twice)
    # a test after the function sets the parameter is not settled by the call's literal
    later = "def f(a=None):\n    a = make()\n    if a is None:\n        return 0\n    return a\ndef g():\n    return f()\n"
    assert fold_constants(later) == later


def test_formatting_cuts_keep_the_same_statements():
    code = ("import iree.runtime as rt\n"
            "def load(b):\n    import iree.runtime as rt\n    from x import y\n    c = call(1,\n             2)\n"
            "    if c is None:  # why\n        raise RuntimeError('none')\n    return rt.load(y(c))\n")
    body, imports = hoisted(code)
    assert imports == ["import iree.runtime as rt"] and "    from x import y" in body  # one function: stays
    compact = one_line_ifs(joined(body))
    assert "    c = call(1, 2)\n" in compact and "    if c is None: raise RuntimeError('none')  # why\n" in compact
    assert ast.dump(ast.parse(compact)) == ast.dump(ast.parse(body))
