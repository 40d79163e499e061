"""Grade a saved file of completions (`ads grade`): its rows, in order, with `correct`, `extracted`, `reason` added.

Parquet or JSONL in; Parquet out (or JSONL when the output path ends in .jsonl), written atomically. A completion
cell may be text or a list of chat messages (their contents are joined); the answer cell a string, a number or
a list of accepted answers, and one JSONL file may mix them.

The file is streamed, never held whole: a first pass checks it (JSON, columns, one type per column) and a second
grades it batch by batch (`BATCH_ROWS` rows or `BATCH_BYTES` of JSON at most), writing each batch as it goes,
so memory stays near one batch whatever the file's size. The output is checked before any row is graded. In
Parquet output a JSONL column whose values mix types (strings and numbers, lists and strings) is written as text:
strings as they are, anything else as its JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ads_core.common.errors import InputError
from ads_core.grading.api import Grade, grade_many

GRADE_COLUMNS = ("correct", "extracted", "reason")
SUFFIXES = (".parquet", ".jsonl")
BATCH_ROWS = 1024
BATCH_BYTES = 2 << 20


@dataclass
class FileGrades:
    rows: int
    correct: int
    out: str
    reasons: dict[str, int] = field(default_factory=dict)
    slowest_s: float = 0.0  # the longest time one row took (waiting for a verifier included)
    first_error: str = ""  # "row N: detail" of the first row with reason error (the output has no detail column)


@dataclass
class Plan:
    """What the first pass learnt: the rows, the columns and the output's schema."""

    rows: int
    columns: list[str]
    schema: Any  # pyarrow schema of the output
    as_text: set[str] = field(default_factory=set)  # JSONL columns of mixed types, written as text


def default_out(path: Path) -> Path:
    """``<FILE stem>.graded.parquet`` beside the input."""
    return path.with_name(f"{path.stem}.graded.parquet")


def check_out(path: Path, out: Path | None) -> Path:
    """The output path, once a file could be written in its folder (InputError naming it otherwise: permission
    denied, a read-only filesystem, a full disk, in `ads format`'s words): run before grading."""
    target = out or default_out(path)
    if target.is_dir():
        raise InputError(f"{target}: is a folder; name the output file", ["out"])
    if target.suffix not in SUFFIXES:
        raise InputError(f"{target}: the output must end in .parquet or .jsonl", ["out"])
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"{target}: {folder} is not a folder", ["out"])
    from ads_core.storage import StorageError, check_writable

    try:  # a file written and removed there, as `ads format` checks its OUT: the same words for the same problem
        check_writable(str(folder))
    except StorageError as exc:
        raise InputError(f"{target}: cannot write in {folder}: {exc.problem}; {exc.fix}", ["out"]) from None
    return target


def completion_text(value: Any) -> str:
    """A completion cell as text: chat messages are joined by their contents; None is empty."""
    if value is None:
        return ""
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if isinstance(value, list):
        return "".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in value)
    return str(value)


def plan_file(path: Path, completion_col: str, answer_col: str) -> Plan:
    """The first pass: InputError naming the file (and line) when it cannot be read or lacks a column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.suffix not in SUFFIXES:
        raise InputError(f"{path}: not a .parquet or .jsonl file of completions")
    as_text: set[str] = set()
    if path.suffix == ".parquet":
        try:
            meta = pq.ParquetFile(path)
            schema, rows = meta.schema_arrow, meta.metadata.num_rows
        except (OSError, pa.ArrowException) as exc:
            raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
        columns = list(schema.names)
    else:
        types: dict[str, Any] = {}
        rows = 0
        for batch in _json_batches(path):
            rows += len(batch)
            for name in dict.fromkeys(k for row in batch for k in row):
                if name not in types:
                    types[name] = pa.null()
                if name in as_text:
                    continue
                try:
                    kind = pa.array([row.get(name) for row in batch]).type
                    types[name] = _unify(types[name], kind)
                except (pa.ArrowException, TypeError, ValueError, OverflowError):
                    as_text.add(name)
        columns = list(types)
        schema = pa.schema([(n, pa.string() if n in as_text else t) for n, t in types.items()])
    for option, column in (("completion_col", completion_col), ("answer_col", answer_col)):
        if column not in columns:
            listed = ", ".join(columns) or "none"
            raise InputError(f"{path}: no column {column!r} (columns: {listed}); name one with {option}", [option])
    kept = [f for f in schema if f.name not in GRADE_COLUMNS]
    out_schema = pa.schema([*kept, ("correct", pa.bool_()), ("extracted", pa.string()), ("reason", pa.string())])
    return Plan(rows, columns, out_schema, as_text)


def _unify(known: Any, new: Any) -> Any:
    import pyarrow as pa

    both = [pa.schema([("c", known)]), pa.schema([("c", new)])]
    return pa.unify_schemas(both, promote_options="permissive").field("c").type


def _json_batches(path: Path) -> Iterator[list[dict[str, Any]]]:
    """The JSONL file's objects, a batch at a time (InputError naming the line that is not one)."""
    batch: list[dict[str, Any]] = []
    size = 0
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
                batch.append(row)
                size += len(line)
                if len(batch) >= BATCH_ROWS or size >= BATCH_BYTES:
                    yield batch
                    batch, size = [], 0
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text ({exc})") from None
    if batch:
        yield batch


def _row_batches(path: Path) -> Iterator[list[dict[str, Any]]]:
    if path.suffix == ".jsonl":
        yield from _json_batches(path)
        return
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS):
        yield batch.to_pylist()


def grade_file(
    path: Path,
    completion_col: str,
    answer_col: str,
    out: Path | None = None,
    *,
    timeout_s: float | None = None,
    progress: Callable[[int], None] | None = None,
    plan: Plan | None = None,
) -> FileGrades:
    """Grade every row of PATH; write them with the grade columns added (replaced when present) to OUT."""
    from ads_core.storage import atomic_local_file

    target = check_out(path, out)
    plan = plan or plan_file(path, completion_col, answer_col)
    reasons: dict[str, int] = {}
    rows = correct = 0
    slowest = 0.0
    first_error = ""
    with atomic_local_file(str(target)) as tmp:
        writer = _Writer(tmp, target.suffix, plan)
        try:
            for batch in _row_batches(path):
                completions = [completion_text(row.get(completion_col)) for row in batch]
                grades = grade_many(completions, [row.get(answer_col) for row in batch], timeout_s=timeout_s)
                writer.write(batch, grades)
                for i, g in enumerate(grades):
                    reasons[g.reason] = reasons.get(g.reason, 0) + 1
                    slowest = max(slowest, g.elapsed_s)
                    if g.reason == "error" and not first_error:
                        first_error = f"row {rows + i}: {g.detail}"
                rows += len(batch)
                correct += sum(g.correct for g in grades)
                if progress is not None:
                    progress(len(batch))
        finally:
            writer.close()
    return FileGrades(rows, correct, str(target), reasons, slowest, first_error)


class _Writer:
    """Writes graded batches to the temp file: Parquet with the planned schema, or JSON lines."""

    def __init__(self, tmp: Path, suffix: str, plan: Plan) -> None:
        self.plan = plan
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            self.parquet: Any = pq.ParquetWriter(str(tmp), plan.schema)
            self.text = None
        else:
            self.parquet = None
            self.text = open(tmp, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def write(self, batch: list[dict[str, Any]], grades: list[Grade]) -> None:
        if self.text is not None:
            for row, g in zip(batch, grades, strict=True):
                row = {k: v for k, v in row.items() if k not in GRADE_COLUMNS}
                row.update(correct=g.correct, extracted=g.extracted, reason=g.reason)
                self.text.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            return
        import pyarrow as pa

        arrays = []
        for f in self.plan.schema:
            if f.name == "correct":
                values: list[Any] = [g.correct for g in grades]
            elif f.name == "extracted":
                values = [g.extracted for g in grades]
            elif f.name == "reason":
                values = [g.reason for g in grades]
            elif f.name in self.plan.as_text:
                values = [_as_text(row.get(f.name)) for row in batch]
            else:
                values = [row.get(f.name) for row in batch]
            arrays.append(pa.array(values, type=f.type))
        self.parquet.write_table(pa.Table.from_arrays(arrays, schema=self.plan.schema))

    def close(self) -> None:
        if self.parquet is not None:
            self.parquet.close()
        if self.text is not None:
            self.text.close()


def _as_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)
