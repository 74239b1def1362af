"""Errors that end a command with one line and exit 2 (DESIGN §5)."""
from __future__ import annotations


class UsageError(Exception):
    """Bad usage: the message is one line; the command exits 2 before writing anything."""
