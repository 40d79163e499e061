"""User-given names that become parts of paths (dataset names): one segment, never a way out of OUT."""

from __future__ import annotations

import re

_BAD = re.compile(r"[\x00-\x1f\x7f/\\]")
MAX_LEN = 200


def safe_name(value: str, what: str = "dataset name") -> str:
    """`value` if it is one plain path segment; otherwise ValueError saying why."""
    if not value or not value.strip():
        raise ValueError(f"{what} is empty")
    if len(value) > MAX_LEN:
        raise ValueError(f"{what} {value[:40]!r}... is longer than {MAX_LEN} characters")
    if value in (".", "..") or value.startswith("~"):
        raise ValueError(f"{what} {value!r} is not a plain name (no '.', '..' or '~')")
    if _BAD.search(value) or ":" in value:
        raise ValueError(f"{what} {value!r} must not contain path separators, ':' or control characters")
    return value
