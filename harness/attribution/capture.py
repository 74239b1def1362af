"""What a reader of a path's intermediates hands back, defined with the path face (harness.paths.base).

A path's `intermediates` hook (docs/contracts.md §6) returns Captures, so the types
live with the face a plug-in path implements; attribution, which reads
them, names them here too (harness/repro/stage_table.py imports
Unavailable from this module).
"""
from harness.paths.base import Capture, Intermediate
from harness.paths.base import IntermediatesUnavailable as Unavailable

__all__ = ["Capture", "Intermediate", "Unavailable"]
