"""What a reader yields: one `RawRow` per physical record, parsed or rejected with its reason.

Shared by the text readers (`readers`), the columnar ones (`arrow`) and the source listing (`sources`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_GZ = (".jsonl.gz", ".ndjson.gz", ".json.gz", ".csv.gz")
SUPPORTED_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".parquet", ".arrow", *_GZ)


def is_supported(path: str) -> bool:
    return path.lower().endswith(SUPPORTED_SUFFIXES)


@dataclass(slots=True)
class RawRow:
    source_file: str
    source_row: int  # 0-based row number in its file (for JSONL: line number - 1)
    data: dict[str, Any] | None
    reject_reason: str | None = None
    reject_message: str | None = None
    raw: str | None = None
