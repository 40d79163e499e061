"""JSON and Parquet artifacts, read and written (atomically) through the storage layer."""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ads_core.storage.atomic import read_bytes, write_bytes
from ads_core.storage.errors import (
    translating,
)
from ads_core.storage.fs import get_fs


def write_json(uri: str, obj: Any) -> None:
    write_bytes(uri, (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode())


def read_json(uri: str) -> Any:
    return json.loads(read_bytes(uri))


def write_parquet(uri: str, table: pa.Table) -> None:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    write_bytes(uri, buf.getvalue())


def read_parquet(uri: str, columns: list[str] | None = None) -> pa.Table:
    with translating(uri):
        fs, path = get_fs(uri)
        with fs.open(path, "rb") as fh:
            return pq.read_table(fh, columns=columns)


def parquet_num_rows(uri: str) -> int:
    with translating(uri):
        fs, path = get_fs(uri)
        with fs.open(path, "rb") as fh:
            return pq.ParquetFile(fh).metadata.num_rows
