"""The case spec: defaults, round trips, stable ids and one-line errors."""
import json
import subprocess
import sys

import pytest

from harness.spec import CaseSpec, SpecError

SEED = {"pattern": "layer_norm", "dtype": "float16", "shape": [1, 4096],
        "input": {"kind": "alternating", "amplitude": 0.25}}


def test_defaults_are_filled_in():
    spec = CaseSpec.from_dict(SEED)
    d = spec.to_dict()
    assert d["style"] == "module" and d["weight_dtype"] == "float16" and d["cast"] is None
    assert d["affine"] == "weight_bias" and d["eps"] == 1e-5 and d["seed"] == 0
    assert d["input"] == {"kind": "alternating", "amplitude": 0.25, "offset": 0.0}
    assert d["params"] == {"kind": "ones"}
    rms = CaseSpec.from_dict({"pattern": "rms_norm", "style": "qwen", "dtype": "bfloat16", "shape": [2, 8]})
    assert (rms.affine, rms.eps, rms.cast) == ("weight", 1e-6, "to")
    assert CaseSpec.from_dict({**rms.to_dict(), "style": "llama", "cast": None} | {"cast": "type_as"}).cast == "type_as"


def test_round_trip_through_json_keeps_the_spec_and_its_id():
    spec = CaseSpec.from_dict(SEED)
    again = CaseSpec.from_json(spec.to_json())
    assert again == spec and again.case_id == spec.case_id
    # spelling the defaults out, or ints for floats, is the same case
    explicit = dict(SEED, style="module", eps=0.00001, seed=0, input={"kind": "alternating", "amplitude": 0.25, "offset": 0})
    assert CaseSpec.from_dict(explicit).case_id == spec.case_id


def test_case_id_is_the_same_in_another_process():
    spec = CaseSpec.from_dict(SEED)
    code = ("import json,sys; from harness.spec import CaseSpec; "
            f"print(CaseSpec.from_dict(json.loads({json.dumps(json.dumps(SEED))})).case_id)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == spec.case_id
    assert len(spec.case_id) == 12


def test_structure_key_ignores_the_input_but_not_the_dtype():
    a = CaseSpec.from_dict(SEED)
    b = a.replace(input={"kind": "normal"}, seed=7)
    assert a.structure_key() == b.structure_key() and a.case_id != b.case_id
    assert a.replace(dtype="float32").structure_key() != a.structure_key()
    # random parameters are drawn from the seed, so the seed is part of the structure
    c = a.replace(params={"kind": "normal"})
    assert c.structure_key() != c.replace(seed=1).structure_key()


@pytest.mark.parametrize("change, key", [
    ({"colour": "red"}, "colour"),
    ({"pattern": "batchnorm"}, "pattern"),
    ({"dtype": "float64"}, "dtype"),
    ({"dtype": 16}, "dtype"),
    ({"style": "qwen"}, "style"),
    ({"cast": "to"}, "cast"),
    ({"style": "upcast", "cast": "reinterpret"}, "cast"),
    ({"shape": "1x4096"}, "shape"),
    ({"shape": [1, 0]}, "shape"),
    ({"shape": [1, 4.5]}, "shape"),
    ({"layout": "channels_last"}, "layout"),
    ({"layout": "nhwc"}, "layout"),
    ({"affine": "bias"}, "affine"),
    ({"eps": "small"}, "eps"),
    ({"eps": -1}, "eps"),
    ({"groups": 2}, "groups"),
    ({"input": {"kind": "gaussian"}}, "input.kind"),
    ({"input": {"kind": "normal", "sigma": 2}}, "input.sigma"),
    ({"input": {"kind": "normal", "std": "wide"}}, "input.std"),
    ({"input": "normal"}, "input"),
    ({"params": {"kind": "zeros"}}, "params.kind"),
    ({"seed": -1}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"weight_dtype": "bfloat16"}, "weight_dtype"),
])
def test_bad_specs_are_one_line_naming_the_key(change, key):
    with pytest.raises(SpecError) as info:
        CaseSpec.from_dict({**SEED, **change})
    message = str(info.value)
    assert "\n" not in message and repr(key) in message


@pytest.mark.parametrize("raw, key", [
    ({"pattern": "group_norm", "dtype": "float32", "shape": [2, 6, 4], "groups": 4}, "groups"),
    ({"pattern": "rms_norm", "dtype": "float32", "shape": [2, 6], "affine": "weight_bias"}, "affine"),
    ({"pattern": "instance_norm", "dtype": "float32", "shape": [2, 6]}, "shape"),
    ({"pattern": "layer_norm", "dtype": "float32"}, "shape"),
    ({"dtype": "float32", "shape": [2]}, "pattern"),
])
def test_impossible_combinations_name_the_key(raw, key):
    with pytest.raises(SpecError, match=repr(key)):
        CaseSpec.from_dict(raw)


@pytest.mark.parametrize("inp, key", [
    ({"kind": "normal", "std": -1}, "input.std"),
    ({"kind": "subnormal", "fraction": 1.5}, "input.fraction"),
    ({"kind": "uniform", "low": 2, "high": 1}, "input.low"),
    ({"kind": "outlier", "scale": -3}, "input.scale"),
    ({"kind": "offset", "offset": 1e300}, "input.offset"),
])
def test_input_parameters_out_of_range_name_the_key(inp, key):
    with pytest.raises(SpecError, match=repr(key)):
        CaseSpec.from_dict({**SEED, "input": inp})


@pytest.mark.parametrize("raw", [
    {"pattern": "group_norm", "dtype": "float32", "shape": [1, 4], "groups": 4},
    {"pattern": "instance_norm", "dtype": "float32", "shape": [2, 4, 1]},
])
def test_norms_torch_refuses_for_lack_of_values_are_rejected(raw):
    with pytest.raises(SpecError, match="'shape'"):
        CaseSpec.from_dict(raw)


def test_a_program_spec_carries_its_parsed_program_and_derives_its_keys_once():
    import pickle

    from harness.program import Program, parse
    from harness.spec import program_case

    raw = {"pattern": "rms_norm", "dtype": "float16", "shape": [2, 8],
           "program": "h = x.float()\nreturn (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)"}
    spec = CaseSpec.from_dict(raw)
    assert isinstance(spec.parsed_program, Program) and spec.parsed_program.source == spec.program
    assert spec.parsed_program == parse(spec.program, case=program_case(spec))
    assert spec.case_id is spec.case_id and spec.structure_key() is spec.structure_key()
    copy = pickle.loads(pickle.dumps(spec))  # as a spec crosses to a worker
    assert copy == spec and copy.case_id == spec.case_id and copy.parsed_program == spec.parsed_program
    made = CaseSpec(**{f: getattr(spec, f) for f in spec.__dataclass_fields__})  # not through from_dict
    assert made.parsed_program == spec.parsed_program and made.structure_key() == spec.structure_key()
    assert CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float32", "shape": [4]}).parsed_program is None


# -- a norm instance of a whole model with its captured input (docs/models.md) ---------------------------------------
HEX = "ab" * 32
INSTANCE = {"class": "user_models:TinyMixer", "init": {"width": 16}, "instance": "norm_out", "dtype": "float16",
            "shape": [2, 4, 16], "input": {"kind": "captured", "sha256": HEX}}


def test_an_instance_case_names_its_submodule_and_its_captured_input():
    spec = CaseSpec.from_dict(INSTANCE)
    assert spec.instance == "norm_out" and spec.to_dict()["instance"] == "norm_out"
    assert spec.input_dict == {"kind": "captured", "sha256": HEX}
    assert CaseSpec.from_json(spec.to_json()) == spec
    other = CaseSpec.from_dict({**INSTANCE, "input": {"kind": "captured", "sha256": "cd" * 32}})
    assert other.case_id != spec.case_id and other.structure_key() == spec.structure_key()  # the input is dropped
    assert CaseSpec.from_dict({**INSTANCE, "instance": "norm_in"}).structure_key() != spec.structure_key()
    plain = CaseSpec.from_dict({k: v for k, v in INSTANCE.items() if k not in ("instance", "input")})
    assert "instance" not in plain.to_dict()  # a module case naming none is what it was
    assert "TinyMixer[norm_out]" in str(spec) and "sha256=abababababab" in str(spec)


@pytest.mark.parametrize("change, key", [
    ({"input": {"kind": "captured"}}, "input.sha256"),
    ({"input": {"kind": "captured", "sha256": "AB" * 32}}, "input.sha256"),
    ({"input": {"kind": "captured", "sha256": HEX, "scale": 2}}, "input.scale"),
    ({"instance": "layers..1"}, "instance"),
    ({"instance": 3}, "instance"),
])
def test_bad_instance_keys_name_the_key(change, key):
    with pytest.raises(SpecError, match=rf"^spec key '{key}'"):
        CaseSpec.from_dict({**INSTANCE, **change})


def test_only_a_module_case_names_an_instance():
    with pytest.raises(SpecError, match=r"^spec key 'instance'"):
        CaseSpec.from_dict({"pattern": "layer_norm", "dtype": "float16", "shape": [2, 8], "instance": "norm"})
