"""Norm programs (docs/contracts.md §7): model code for a norm, in a small checked subset of Python.

User text is parsed with `ast` into a frozen IR and never executed. The IR
runs as a torch module (`build_program_module`, what every path exports) and
in FP64 with a running error bound (`evaluate`, the reference). Modules:
ir (nodes, ProgramCase), parse (text -> IR), check (torch's shape/dtype
rules), walk (the shared tree walk), torch_module, bounds (per-op error
rules and constants), interpret (FP64 evaluation), styles (catalog styles
as program text).
"""
from harness.program.typecheck import check
from harness.program.interpret import Evaluation, Stage, evaluate
from harness.program.ir import Program, ProgramCase, ProgramError
from harness.program.parse import parse
from harness.program.styles import style_program

# The torch module loads on first use, so that importing the parser (the spec
# does, for every case) does not import torch.
_TORCH = ("ProgramModule", "build_program_module")


def __getattr__(name: str):
    if name in _TORCH:
        from harness.program import torch_module

        return getattr(torch_module, name)
    raise AttributeError(f"module 'harness.program' has no attribute {name!r}")


__all__ = ["Evaluation", "Program", "ProgramCase", "ProgramError", "ProgramModule", "Stage",
           "build_program_module", "check", "evaluate", "parse", "style_program"]
