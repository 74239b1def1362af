"""The case spec (docs/contracts.md §1, §7, §8): keys and their values, the normalised CaseSpec, spec files.

Above the program language (a program case is parsed to be checked) and below
everything that runs a case.
"""
from harness.spec.case import CaseSpec
from harness.spec.files import load_spec_file
from harness.spec.keys import (
    AFFINES, CASTS, CATALOG_STYLES, EXTRA_INPUTS, INPUT_KINDS, KEYS, LAYOUTS, PARAM_KINDS, PATTERNS,
    PROGRAM_KEYS, PROGRAM_PARAMS, STYLES, SpecError, input_of,
)
from harness.spec.program_keys import program_case

__all__ = ["AFFINES", "CASTS", "CATALOG_STYLES", "CaseSpec", "EXTRA_INPUTS", "INPUT_KINDS", "KEYS", "LAYOUTS",
           "PARAM_KINDS", "PATTERNS", "PROGRAM_KEYS", "PROGRAM_PARAMS", "STYLES", "SpecError", "load_spec_file",
           "input_of", "program_case"]
