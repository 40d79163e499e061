"""Columnar inputs: Parquet files and Arrow IPC files (`save_to_disk`'s `data-*.arrow`, stream or file format).

String columns are decoded defensively: Arrow does not validate UTF-8 when it reads, so one row with
invalid bytes would make a whole batch's `to_pylist` raise. Such a row becomes a `bad_encoding` reject
naming its column, and the other rows of the batch are kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ads_core.common.errors import InputError
from ads_core.ingest.records import RawRow, ReadLedger

_READ_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, EOFError)


def iter_columnar_batches(uri: str, batch_rows: int, ledger: ReadLedger) -> Iterator[list[RawRow]]:
    """Rows of a Parquet or Arrow file; LEDGER hashes the file and checks that it did not change meanwhile."""
    if uri.split("?", 1)[0].lower().endswith(".arrow"):
        yield from _iter_arrow(uri, batch_rows, ledger)
    else:
        yield from _iter_parquet(uri, batch_rows, ledger)


def _check_names(uri: str, schema: pa.Schema) -> None:
    dups = sorted(name for name, n in Counter(schema.names).items() if n > 1)
    if dups:
        raise InputError(
            f"{uri}: duplicate column names: {', '.join(map(repr, dups))}; rename them so each column has one name"
        )


def _iter_parquet(uri: str, batch_rows: int, ledger: ReadLedger) -> Iterator[list[RawRow]]:
    with ledger.random_access(uri) as fh:
        try:
            pf = pq.ParquetFile(fh)
        except _READ_ERRORS as exc:
            raise InputError(f"{uri}: not a readable Parquet file ({exc})") from exc
        _check_names(uri, pf.schema_arrow)
        row = 0
        try:
            for record_batch in pf.iter_batches(batch_size=batch_rows):
                yield batch_rows_of(uri, record_batch, row)
                row += record_batch.num_rows
        except _READ_ERRORS as exc:
            raise InputError(f"{uri}: Parquet file is corrupt or truncated after row {row} ({exc})") from exc


def _iter_arrow(uri: str, batch_rows: int, ledger: ReadLedger) -> Iterator[list[RawRow]]:
    data = ledger.whole(uri)
    reader: Any = None
    for opener in (pa.ipc.open_stream, pa.ipc.open_file):  # datasets writes the stream format
        try:
            reader = opener(pa.BufferReader(data))
            break
        except _READ_ERRORS:
            continue
    if reader is None:
        raise InputError(f"{uri}: not a readable Arrow IPC file (neither stream nor file format)")
    _check_names(uri, reader.schema)
    row = 0
    try:
        batches = (
            (reader.get_batch(i) for i in range(reader.num_record_batches))
            if isinstance(reader, pa.ipc.RecordBatchFileReader)
            else iter(reader)
        )
        for record_batch in batches:
            for start in range(0, record_batch.num_rows, batch_rows):
                part = record_batch.slice(start, batch_rows)
                yield batch_rows_of(uri, part, row)
                row += part.num_rows
    except _READ_ERRORS as exc:
        raise InputError(f"{uri}: Arrow file is corrupt or truncated after row {row} ({exc})") from exc


def batch_rows_of(uri: str, batch: pa.RecordBatch, first_row: int) -> list[RawRow]:
    """The rows of one record batch; a row whose strings are not UTF-8 becomes a bad_encoding reject."""
    try:
        return [RawRow(uri, first_row + i, r) for i, r in enumerate(batch.to_pylist())]
    except UnicodeDecodeError:
        pass
    rows: list[RawRow] = []
    for i in range(batch.num_rows):
        one = batch.slice(i, 1)
        try:
            rows.append(RawRow(uri, first_row + i, one.to_pylist()[0]))
        except UnicodeDecodeError as exc:
            column = next(
                (name for name, col in zip(one.schema.names, one.columns, strict=True) if _undecodable(col)), "?"
            )
            rows.append(
                RawRow(
                    uri,
                    first_row + i,
                    None,
                    "bad_encoding",
                    f"row {first_row + i}: column {column!r} is not valid UTF-8 (byte {exc.start})",
                )
            )
    return rows


def _undecodable(column: pa.Array) -> bool:
    try:
        column.to_pylist()
    except UnicodeDecodeError:
        return True
    return False
