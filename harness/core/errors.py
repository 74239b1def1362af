"""Errors that end a command with one line and exit 2 (docs/contracts.md §5)."""
from __future__ import annotations


class UsageError(Exception):
    """Bad usage: the message is one line; the command exits 2 before writing anything."""
