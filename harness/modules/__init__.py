"""Module cases (docs/contracts.md §8): a norm class from model code, built, exported and lifted into a norm program.

The class is user code: everything here that imports, builds or runs it is
called only inside worker processes (as pytest runs a test file). The
exported ATen graph is *lifted* into a program of the language (docs/contracts.md §7),
which gives the FP64 reference and its bound exactly as a program does; the
paths compile the module itself. Modules: load (import the class, build it
from `init`), names (the lifted program's names for inputs and parameters),
state (redraw and read the parameters), lift, lift_ops and lift_shapes (ATen
graph -> program IR), lift_check (the lifted program against the module's own
float64 run), module_case (all of it for one spec: ModuleCase, and Resolved as
plain data).
"""
from harness.modules.load import ModuleSpecError, Unliftable

LIFT = "@lift"  # the pseudo path a worker resolves a module case under, before any path runs

__all__ = ["LIFT", "ModuleSpecError", "Unliftable"]
