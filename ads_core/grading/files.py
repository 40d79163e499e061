"""Grade a saved file of completions (`ads grade`): its rows, in order, with `correct`, `extracted`, `reason` added.

Parquet or JSONL in; Parquet out (or JSONL when the output path ends in .jsonl), written atomically. A completion
cell may be text or a list of chat messages (their contents are joined); the answer cell a string, a number or
a list of accepted answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ads_core.common.errors import InputError
from ads_core.grading.api import grade_many

GRADE_COLUMNS = ("correct", "extracted", "reason")
SUFFIXES = (".parquet", ".jsonl")


@dataclass
class FileGrades:
    rows: int
    correct: int
    out: str
    reasons: dict[str, int] = field(default_factory=dict)
    slowest_s: float = 0.0  # the longest time one row took (waiting for a verifier included)


def default_out(path: Path) -> Path:
    """``<FILE stem>.graded.parquet`` beside the input."""
    return path.with_name(f"{path.stem}.graded.parquet")


def read_rows(path: Path) -> Any:
    """The file as a pyarrow Table; InputError naming the file (or line) when it cannot be read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.suffix not in SUFFIXES:
        raise InputError(f"{path}: not a .parquet or .jsonl file of completions")
    if path.suffix == ".parquet":
        try:
            return pq.read_table(path)
        except (OSError, pa.ArrowException) as exc:
            raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    rows = []
    with path.open(encoding="utf-8", errors="strict") as fh:
        try:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as exc:
                    raise InputError(f"{path} line {number}: not JSON ({exc})") from None
                if not isinstance(row, dict):
                    raise InputError(f"{path} line {number}: not a JSON object")
                rows.append(row)
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text ({exc})") from None
    try:
        return pa.Table.from_pylist(rows)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise InputError(f"{path}: its rows do not form one table ({exc})") from None


def completion_text(value: Any) -> str:
    """A completion cell as text: chat messages are joined by their contents; None is empty."""
    if value is None:
        return ""
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if isinstance(value, list):
        return "".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in value)
    return str(value)


def grade_file(
    path: Path,
    completion_col: str,
    answer_col: str,
    out: Path | None = None,
    *,
    timeout_s: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> FileGrades:
    """Grade every row of PATH; write them with the grade columns added (replaced when present) to OUT."""
    return grade_table(read_rows(path), path, completion_col, answer_col, out, timeout_s=timeout_s, progress=progress)


def check_columns(table: Any, path: Path, completion_col: str, answer_col: str, out: Path | None = None) -> Path:
    """The output path, once the columns are known to exist (InputError naming the missing one otherwise)."""
    for option, column in (("completion_col", completion_col), ("answer_col", answer_col)):
        if column not in table.column_names:
            columns = ", ".join(table.column_names) or "none"
            raise InputError(f"{path}: no column {column!r} (columns: {columns}); name one with {option}", [option])
    target = out or default_out(path)
    if target.suffix not in SUFFIXES:
        raise InputError(f"{target}: the output must end in .parquet or .jsonl")
    return target


def grade_table(
    table: Any,
    path: Path,
    completion_col: str,
    answer_col: str,
    out: Path | None = None,
    *,
    timeout_s: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> FileGrades:
    """`grade_file` on a table already read from PATH (to know its size first)."""
    import pyarrow as pa

    target = check_columns(table, path, completion_col, answer_col, out)
    completions = [completion_text(v) for v in table.column(completion_col).to_pylist()]
    truths = table.column(answer_col).to_pylist()
    grades = grade_many(completions, truths, timeout_s=timeout_s, progress=progress)
    kept = table.drop_columns([c for c in GRADE_COLUMNS if c in table.column_names])
    graded = kept.append_column("correct", pa.array([g.correct for g in grades], pa.bool_()))
    graded = graded.append_column("extracted", pa.array([g.extracted for g in grades], pa.string()))
    graded = graded.append_column("reason", pa.array([g.reason for g in grades], pa.string()))
    _write(graded, target)
    reasons: dict[str, int] = {}
    for g in grades:
        reasons[g.reason] = reasons.get(g.reason, 0) + 1
    slowest = max((g.elapsed_s for g in grades), default=0.0)
    return FileGrades(len(grades), sum(g.correct for g in grades), str(target), reasons, slowest)


def _write(table: Any, target: Path) -> None:
    import pyarrow.parquet as pq

    from ads_core.storage import atomic_local_file

    with atomic_local_file(str(target)) as tmp:
        if target.suffix == ".parquet":
            pq.write_table(table, tmp)
        else:
            with open(tmp, "w", encoding="utf-8") as fh:
                for row in table.to_pylist():
                    fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
