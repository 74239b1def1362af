"""A module case's lifted program as a ready program spec (docs/contracts.md §7): what `normdiff lift` prints and what
`repro --inline` reproduces.

Plain data from the case's LIFT record (its resolution in a worker): the
program, the module's names for its inputs and parameters, their shapes,
and its parameters' values, kept as a params kind that draws them again
(`ones`, `fill` for constant values such as Gemma's zero weight, `normal`
when the spec redraws), so the program spec gives the module case's verdict.
"""
from __future__ import annotations

from harness.program.ir import ones_value


def program_spec(spec, record: dict) -> tuple[dict, list[str]]:
    """(the lifted program as a §7 spec, notes for stderr) from a module case's LIFT record."""
    lifted = record["lifted"]
    notes = []
    out = {"pattern": spec.pattern if spec.pattern != "program" else lifted["pattern"], "dtype": spec.dtype}
    if spec.weight_dtype != spec.dtype:
        out["weight_dtype"] = spec.weight_dtype
    out.update(shape=list(spec.shape), program=lifted["source"])
    if spec.layout != "contiguous":
        out["layout"] = spec.layout
    out["input"] = spec.input_dict
    inputs = spec.inputs_dict
    if len(lifted["inputs"]) > 1:
        out["inputs"] = {prog: inputs[fwd] for prog, fwd in lifted["inputs"][1:]}
    out["param_shapes"] = {prog: list(shape) for prog, _, shape in lifted["params"]}
    kind = spec.params_dict["kind"]
    if kind == "init":
        values = record.get("param_values") or {}
        if all(v is not None and v == ones_value(n) for n, v in values.items()):
            kind = "ones"
        elif all(v is not None for v in values.values()):
            out["params"] = {"kind": "fill", "values": {n: v for n, v in values.items() if v != ones_value(n)}}
        else:
            kind = "normal"
            varied = sorted(n for n, v in values.items() if v is None)
            notes.append(f"the constructor's values of {', '.join(varied)} are not constant: the spec draws every "
                         "parameter N(0, 1) instead (lift with --params normal for the very same values)")
    if "params" not in out:
        out["params"] = {"kind": kind}
    if kind == "normal" or spec.params_dict["kind"] != "init":
        out["seed"] = spec.seed
    return out, notes
