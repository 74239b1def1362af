"""The standalone repro script of a module case (docs/contracts.md §8): the user's class imported and built as normdiff
built it, or (`--inline`) its lifted program pasted as the model.

Everything about the class comes from its resolution in a worker (the LIFT
record: the lifted program, its names for the forward's arguments and the
parameters, and their values): nothing of the user's code runs here. The
script imports the class, the one import besides torch, numpy and the
library under test (its import root in a comment), builds it from `init`
under the spec's seed, moves it to the weight dtype, redraws its parameters
as normdiff does, checks every input and parameter byte against normdiff's,
and scores the path against the lifted program's FP64 reference, with the
tolerance normdiff computed for it. `--inline` is the repro of the lifted
program's own spec (`normdiff lift`), which gives the same verdict.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os

import numpy as np

from harness import paths
from harness.core.dtypes import np_dtype
from harness.oracle.inputs import NAMED, extra_type, make_inputs
from harness.oracle.reference import by_position, evaluation_reference
from harness.oracle.witness_error import program_witnesses
from harness.program import evaluate
from harness.modules.lifted_spec import program_spec
from harness.repro import pieces as T
from harness.repro import program_script as P
from harness.repro import script as S
from harness.spec import CaseSpec


def decode_arrays(encoded: dict) -> dict[str, np.ndarray]:
    """The LIFT record's parameter values (harness.engine.execute: base64 bytes, dtype, shape)."""
    return {name: np.frombuffer(base64.b64decode(a["data"]), dtype=np_dtype(a["dtype"])).reshape(a["shape"]).copy()
            for name, a in encoded.items()}


def import_root(cls: str) -> str:
    """The folder the class's top-level package is imported from (found, not imported), or a note."""
    top = cls.partition(":")[0].split(".")[0]
    try:
        found = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.origin:
        return "(not found from here: put its folder on PYTHONPATH)"
    origin = os.path.dirname(found.origin)
    return os.path.dirname(origin) if found.submodule_search_locations else origin


def _reference(spec, lifted: dict, arrays: dict[str, np.ndarray]):
    """The module case's Reference: its lifted program in FP64 on its inputs and the module's parameters."""
    from harness.modules.module_case import Resolved
    from harness.program import parse

    resolved = Resolved.from_dict(lifted)
    info = resolved.program_case(spec)
    inputs = make_inputs(spec)
    by_forward = {fwd: prog for prog, fwd in resolved.inputs}
    values = {"x": inputs.x, **{by_forward[k]: v for k, v in inputs.extra.items() if k in by_forward}, **arrays}
    program = parse(resolved.source, case=info)
    witnesses = program_witnesses(spec.case_id, program, info, values)
    return resolved, by_position(evaluation_reference(evaluate(program, info, values), witnesses)), inputs


def _inputs_code(spec, resolved, inputs) -> str:
    lines = ["# -- inputs: drawn in float64 with NumPy's PCG64 and rounded to the case dtypes,",
             "#    exactly as normdiff draws them (the digest below checks every bit, the parameters' too)",
             f"SHAPE = {tuple(spec.shape)!r}", f"SEED = {spec.seed}", f"DTYPE = {S._NP[spec.dtype]}",
             f"WEIGHT_DTYPE = {S._NP[spec.weight_dtype]}", "", "", T.DRAWS, "", "",
             "def rng(stream, name=None):", "    return _rng(SEED, stream, name)", "", "",
             S.draw_input(spec, spec.input_dict, 0, "x", inputs.x), "x = x64.reshape(SHAPE).astype(DTYPE)"]
    for prog, fwd in resolved.inputs[1:]:
        shape, dtype = extra_type(spec, fwd)
        stream = (NAMED, fwd)
        lines.append(S.draw_input(spec, spec.inputs_dict[fwd], stream, prog, inputs.extra[fwd], shape))
        lines.append(f"{prog} = {prog}64.reshape({tuple(shape)}).astype({S._NP[dtype]})")
    return "\n".join(lines) + "\n"


def _model_code(spec, resolved) -> str:
    module, _, name = spec.cls.partition(":")
    init = spec.init_dict
    lines = ["# -- the model: the class under test, imported as the case names it",
             f"#    import root: {import_root(spec.cls)}  (on PYTHONPATH)"]
    config = init.get("config") if isinstance(init.get("config"), dict) and "class" in init["config"] else None
    top = name.split(".")[0]
    lines.append(f"from {module} import {top}")
    if config is not None:
        cmod, _, cname = config["class"].partition(":")
        lines.append(f"from {cmod} import {cname.split('.')[0]}")
        fields = {k: v for k, v in config.items() if k != "class"}
        init = {**init, "config": None}
        lines.append(f"CONFIG = {cname}(**{json.dumps(fields, sort_keys=True)})")
    kwargs = ", ".join(f"{k}=CONFIG" if k == "config" and config is not None else f"{k}={v!r}"
                       for k, v in init.items())
    lines += ["", "with torch.random.fork_rng(devices=[]):  # a constructor that draws draws normdiff's values",
              "    torch.manual_seed(SEED)", f"    model = {name}({kwargs})",
              f"model = model.to(torch.{spec.weight_dtype}).eval()"]
    if spec.instance is not None:  # one norm instance of a whole model (normdiff model)
        lines.append(f"model = model.get_submodule({spec.instance!r})  # the instance under test")
    lines.append("STATE = {**dict(model.named_parameters()), **dict(model.named_buffers())}")
    kind = spec.params_dict["kind"]
    shapes = [(prog, tuple(shape)) for prog, _, shape in resolved.params]
    if kind != "init":
        lines += [f"PARAMS = draw_named_params({kind!r}, SEED, {shapes!r})", "with torch.no_grad():"]
        lines += [f"    {_tensor(state)}.copy_(to_torch(PARAMS[{prog!r}].astype(WEIGHT_DTYPE)))"
                  for prog, state, _ in resolved.params]
    lines += [f"{prog} = to_numpy({_tensor(state)})  # the program's name for {state}"
              for prog, state, _ in resolved.params]
    if resolved.keywords:  # a forward parameter the case leaves out comes before one it gives
        positional = len(resolved.called) - len(resolved.keywords)
        lines += ["", "", "class Call(nn.Module):", '    """The forward called as normdiff calls it (keywords after the '
                  'first parameter left out)."""', "", "    def __init__(self, inner):", "        super().__init__()",
                  "        self.inner = inner", "", "    def forward(self, *args):",
                  f"        return self.inner(*args[:{positional}], **dict(zip({resolved.keywords!r}, "
                  f"args[{positional}:])))", "", "", "model = Call(model).eval()"]
    return "\n".join(lines) + "\n"


def _tensor(state: str) -> str:
    return f"STATE[{state!r}]"


def _digest(inputs, resolved, arrays) -> str:
    h = hashlib.sha256()
    for a in (inputs.x, *(inputs.extra[fwd] for _, fwd in resolved.inputs[1:]),
              *(arrays[prog] for prog, _, _ in resolved.params)):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def render_module(spec, path: str, record: dict, *, bug=None, recorded: str | None = None,
                  inline: bool = False) -> str:
    """The script reproducing module case `spec` on `path` from its LIFT record."""
    if inline:
        lifted, _ = program_spec(spec, record)
        return S.render(CaseSpec.from_dict(lifted), path, bug=bug, recorded=recorded).replace(
            "normdiff repro: ", f"normdiff repro (the lifted program of {spec.cls}): ", 1)
    arrays = decode_arrays(record["param_arrays"])
    resolved, ref, inputs = _reference(spec, record["lifted"], arrays)
    runner = paths.get(path)
    others = [d for d in runner.packages if d != "torch"]
    program = CaseSpec.from_dict({  # the lifted program as a program case: its names and shapes for the reference
        "pattern": spec.pattern, "dtype": spec.dtype, "weight_dtype": spec.weight_dtype, "shape": list(spec.shape),
        "program": resolved.source, "inputs": {p: spec.inputs_dict[f] for p, f in resolved.inputs[1:]},
        "param_shapes": {p: list(s) for p, _, s in resolved.params}})
    names = ["x", *sorted(p for p, _ in resolved.inputs[1:])]
    call = ["x", *(p for p, _ in resolved.inputs[1:])]
    check = (f'INPUT_SHA256 = "{_digest(inputs, resolved, arrays)}"\n_digest = hashlib.sha256()\n'
             f"for _a in ({', '.join(names + [p for p, _, _ in resolved.params])},):\n"
             "    _digest.update(np.ascontiguousarray(_a).tobytes())\n"
             "assert _digest.hexdigest() == INPUT_SHA256, \"the inputs or parameters differ from normdiff's\"\n"
             f"INPUTS = ({', '.join(call)},)  # the model's inputs, in its argument order\n")
    report = S.report_code(spec, path, runner, ref, tuple(dict.fromkeys(("torch", *others, "numpy", "ml_dtypes"))))
    imports = T.IMPORTS + "from torch import nn\nimport torch.nn.functional as F\n" + runner.script_imports
    sections = [S._header(spec, path, runner.description, ", ".join(others) or None, bug, recorded), imports,
                T.CONVERSIONS, _inputs_code(spec, resolved, inputs), _model_code(spec, resolved), check,
                P.reference_code(program), S.path_code(spec, runner), report]
    return "\n\n\n".join(s.strip("\n") for s in sections) + "\n"
