"""Streaming readers for the input formats users have: JSONL, JSON, CSV, Parquet, directories, HF ids.

Each reader yields batches of `RawRow`s so a 1M-row file never sits in Python objects at once.
A row that cannot even be parsed (bad JSON, non-UTF-8 bytes, not an object) is yielded with a
`reject` reason instead of data, so the format stage can account for it: nothing is lost.
Unusable *files* (missing, corrupt, empty, unknown type) raise `InputError`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ads_core import storage

SUPPORTED_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".parquet")
_SURROGATE = re.compile("[\ud800-\udfff]")


class InputError(Exception):
    """Input that cannot be used at all. The CLI prints it as one `error:` line and exits 2."""


@dataclass(slots=True)
class RawRow:
    source_file: str
    source_row: int  # 0-based row number in its file (for JSONL: line number - 1)
    data: dict[str, Any] | None
    reject_reason: str | None = None
    reject_message: str | None = None
    raw: str | None = None


def list_source_files(source: str) -> list[str]:
    """The files a SOURCE names: one file, or every supported file below a directory."""
    fs, path = storage.get_fs(source)
    if not fs.exists(path):
        raise FileNotFoundError(source)
    if fs.isdir(path):
        # Hidden names are skipped: an interrupted atomic write leaves `.NAME.xxxx.tmp.parquet` behind.
        root = path.rstrip("/") + "/"
        files = sorted(f for f in fs.find(path) if f.lower().endswith(SUPPORTED_SUFFIXES)
                       and not any(part.startswith(".") for part in f.removeprefix(root).split("/")))
        if not files:
            raise InputError(
                f"{source}: directory holds no {', '.join(SUPPORTED_SUFFIXES)} files"
            )
        proto = source.split("://", 1)[0] + "://" if "://" in source else ""
        return [proto + f if proto and not f.startswith(proto) else f for f in files]
    if not path.lower().endswith(SUPPORTED_SUFFIXES):
        raise InputError(
            f"{source}: unknown file type (supported: {', '.join(SUPPORTED_SUFFIXES)}, a directory "
            "of those, or a Hugging Face dataset id)"
        )
    return [source]


def iter_file_batches(uri: str, batch_rows: int) -> Iterator[list[RawRow]]:
    suffix = Path(uri.split("?", 1)[0]).suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        yield from _iter_jsonl(uri, batch_rows)
    elif suffix == ".json":
        yield from _iter_json(uri, batch_rows)
    elif suffix == ".csv":
        yield from _iter_csv(uri, batch_rows)
    elif suffix == ".parquet":
        yield from _iter_parquet(uri, batch_rows)
    else:  # pragma: no cover - list_source_files filters suffixes
        raise InputError(f"{uri}: unknown file type")


def safe_text(text: str | bytes) -> str:
    """Text that can always be written: undecodable bytes and lone surrogates become U+FFFD."""
    if isinstance(text, str):
        try:
            text = text.encode("utf-8", errors="surrogateescape")
        except UnicodeEncodeError:  # lone surrogates from JSON escapes such as "\ud800"
            return _SURROGATE.sub("\ufffd", text)
    return text.decode("utf-8", errors="replace")


def _preview(text: str | bytes, limit: int = 300) -> str:
    text = safe_text(text)
    return text if len(text) <= limit else text[:limit] + "…"


def _object_row(uri: str, row: int, obj: Any, raw: str | bytes) -> RawRow:
    if isinstance(obj, dict):
        return RawRow(uri, row, obj)
    return RawRow(uri, row, None, "bad_row", f"row is a JSON {type(obj).__name__}, expected an object",
                  _preview(raw))


def _iter_jsonl(uri: str, batch_rows: int) -> Iterator[list[RawRow]]:
    fs, path = storage.get_fs(uri)
    batch: list[RawRow] = []
    with fs.open(path, "rb") as fh:
        for line_no, line in enumerate(fh):
            if not line.strip():
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                batch.append(RawRow(uri, line_no, None, "bad_encoding",
                                    f"line {line_no + 1} is not valid UTF-8 (byte {exc.start})", _preview(line)))
            else:
                try:
                    obj = json.loads(text)
                except json.JSONDecodeError as exc:
                    batch.append(RawRow(uri, line_no, None, "bad_json",
                                        f"line {line_no + 1} is not valid JSON: {exc.msg} at column {exc.colno}",
                                        _preview(text)))
                except (ValueError, RecursionError) as exc:  # a >4300-digit integer, nesting too deep
                    batch.append(RawRow(uri, line_no, None, "bad_json",
                                        f"line {line_no + 1} cannot be parsed: {exc}", _preview(text)))
                else:
                    batch.append(_object_row(uri, line_no, obj, text))
            if len(batch) >= batch_rows:
                yield batch
                batch = []
    if batch:
        yield batch


def _iter_json(uri: str, batch_rows: int) -> Iterator[list[RawRow]]:
    data = storage.read_bytes(uri)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{uri}: not valid UTF-8 (byte {exc.start}); a .json file must be UTF-8 text") from exc
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{uri}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                         "if it holds one object per line, name it .jsonl") from exc
    except (ValueError, RecursionError) as exc:  # a >4300-digit integer, nesting too deep
        raise InputError(f"{uri}: cannot be parsed as JSON ({exc})") from exc
    if isinstance(obj, dict):
        lists = [v for v in obj.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise InputError(f"{uri}: a .json file must hold a list of rows (or an object with exactly one list)")
        obj = lists[0]
    if not isinstance(obj, list):
        raise InputError(f"{uri}: a .json file must hold a list of rows, found a {type(obj).__name__}")
    for start in range(0, len(obj), batch_rows):
        yield [_object_row(uri, start + i, item, json.dumps(item, default=str)[:300])
               for i, item in enumerate(obj[start:start + batch_rows])]


def _iter_csv(uri: str, batch_rows: int) -> Iterator[list[RawRow]]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    fs, path = storage.get_fs(uri)
    batch: list[RawRow] = []
    with fs.open(path, "rb") as raw_fh:
        fh = io.TextIOWrapper(raw_fh, encoding="utf-8", errors="surrogateescape", newline="")
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"{uri}: cannot read the CSV header: {exc}") from exc
        header = [h.strip() for h in header]
        row_no = 0
        while True:
            try:
                values = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                batch.append(RawRow(uri, row_no, None, "bad_row", f"row {row_no}: malformed CSV ({exc})"))
                row_no += 1
                continue
            if not values or all(not v.strip() for v in values):
                row_no += 1
                continue
            if len(values) != len(header):
                batch.append(RawRow(uri, row_no, None, "bad_row",
                                    f"row {row_no} has {len(values)} fields, the header has {len(header)}",
                                    _preview(",".join(values))))
            else:
                batch.append(RawRow(uri, row_no, dict(zip(header, values, strict=True))))
            row_no += 1
            if len(batch) >= batch_rows:
                yield batch
                batch = []
    if batch:
        yield batch


def _iter_parquet(uri: str, batch_rows: int) -> Iterator[list[RawRow]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    fs, path = storage.get_fs(uri)
    with fs.open(path, "rb") as fh:
        try:
            pf = pq.ParquetFile(fh)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"{uri}: not a readable Parquet file ({exc})") from exc
        row = 0
        try:
            for record_batch in pf.iter_batches(batch_size=batch_rows):
                rows = record_batch.to_pylist()
                yield [RawRow(uri, row + i, r) for i, r in enumerate(rows)]
                row += len(rows)
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"{uri}: Parquet file is corrupt or truncated after row {row} ({exc})") from exc


def looks_like_hub_id(source: str) -> bool:
    return "://" not in source and not os.path.exists(source) and not source.startswith((".", "/", "~"))


def iter_hub_batches(dataset_id: str, split: str, batch_rows: int) -> Iterator[list[RawRow]]:
    """Rows of a Hugging Face dataset, from the local cache only (no network at run time)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        import datasets
    except ImportError as exc:
        raise InputError(f"{dataset_id}: not a local path, and the `datasets` package is not installed "
                         "to load it as a Hugging Face dataset id") from exc
    try:
        ds = datasets.load_dataset(dataset_id, split=split)
    except Exception as exc:  # noqa: BLE001 - datasets raises many types; all mean "not usable here"
        raise InputError(
            f"{dataset_id}: no such local file, and the Hugging Face dataset could not be loaded from the "
            f"local cache (split {split!r}; no network at run time): {type(exc).__name__}: {exc}"
        ) from exc
    label = f"hf://{dataset_id}[{split}]"
    row = 0
    for batch in ds.iter(batch_size=batch_rows):
        names = list(batch)
        n = len(batch[names[0]]) if names else 0
        yield [RawRow(label, row + i, {k: batch[k][i] for k in names}) for i in range(n)]
        row += n
