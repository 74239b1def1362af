"""Spec files: one JSON object, a JSON list, or JSON lines."""
from __future__ import annotations

import json

from harness.spec.case import CaseSpec
from harness.spec.keys import SpecError


def load_spec_file(path: str) -> list[CaseSpec]:
    """Specs from a file: one JSON object, a JSON list, or JSON lines."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        try:
            raw = json.loads(text)
            items = raw if isinstance(raw, list) else [raw]
        except json.JSONDecodeError:
            items = []
            for n, line in enumerate(text.splitlines(), 1):
                if line.strip():
                    try:
                        items.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise SpecError(f"line {n}: not valid JSON ({exc.msg})") from None
        if not items:
            raise SpecError("no spec in the file")
        return [CaseSpec.from_dict(item) for item in items]
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from None
