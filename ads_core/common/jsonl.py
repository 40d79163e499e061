"""Append-only JSONL logs (steps.jsonl, eval.jsonl): read back the records, skipping a torn or hand-edited line.

The steps log's reader lives here, not with the trainer that writes it, so that evaluation (`ads compare`) reads
it without importing training."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def read_records(path: str | os.PathLike[str], keep: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """The JSON objects of PATH in file order for which KEEP holds; a line that does not parse is skipped."""
    p = Path(path)
    if not p.is_file():
        return []
    out = []
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and keep(record):
            out.append(record)
    return out


def read_steps(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """A run's logged steps (``steps.jsonl``) in order; a torn last line (a killed writer) is skipped."""
    return read_records(path, lambda r: isinstance(r.get("step"), int))
