"""Streaming readers for the input formats users have: JSONL, JSON, CSV (each optionally .gz), Parquet, Arrow.

Each reader yields batches of `RawRow`s so a 1M-row file never sits in Python objects at once.
A row that cannot even be parsed (bad JSON, non-UTF-8 bytes, not an object) is yielded with a
`reject` reason instead of data, so the conversion can account for it: nothing is lost.
Unusable *files* (missing, corrupt, empty, unknown type) raise `InputError`.

Every text format accepts `\\n`, `\\r\\n` and a lone `\\r` as line ends, and a leading UTF-8 BOM.
Which files a SOURCE names (directories, `save_to_disk` folders, hub cache snapshots) is decided in
`format_sources`.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from ads_core.common.errors import InputError
from ads_core.ingest.csv_rows import iter_csv
from ads_core.ingest.records import RawRow, ReadLedger

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")  # what errors="surrogateescape" makes of an undecodable byte
MAX_EMBEDDED_JSON_CHARS = 100_000
MAX_EMBEDDED_JSON_DEPTH = 20


DEFAULT_MAX_RECORD_LINES = 1000  # FormatConfig.csv_max_record_lines


def iter_file_batches(
    uri: str, batch_rows: int, ledger: ReadLedger | None = None, max_record_lines: int = DEFAULT_MAX_RECORD_LINES
) -> Iterator[list[RawRow]]:
    """Batches of rows of one file; LEDGER records the bytes read (and raises SourceChanged if the file changed)."""
    ledger = ledger if ledger is not None else ReadLedger(uri)
    lower = uri.split("?", 1)[0].lower()
    gz = lower.endswith(".gz")
    base = lower[:-3] if gz else lower
    if base.endswith((".jsonl", ".ndjson")):
        yield from _guard_gzip(uri, gz, _iter_jsonl(uri, batch_rows, ledger, gz))
    elif base.endswith(".json"):
        yield from _guard_gzip(uri, gz, _iter_json(uri, batch_rows, ledger, gz))
    elif base.endswith(".csv"):
        yield from _guard_gzip(uri, gz, _iter_csv(uri, batch_rows, ledger, gz, max_record_lines))
    elif base.endswith((".parquet", ".arrow")):
        from ads_core.ingest import arrow as format_arrow

        yield from format_arrow.iter_columnar_batches(uri, batch_rows, ledger)
    else:  # pragma: no cover - list_source_files filters suffixes
        raise InputError(f"{uri}: unknown file type")


def _guard_gzip(uri: str, gz: bool, batches: Iterator[list[RawRow]]) -> Iterator[list[RawRow]]:
    """A corrupt or truncated .gz is an unusable file, not a traceback."""
    if not gz:
        yield from batches
        return
    try:
        yield from batches
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputError(f"{uri}: not a readable gzip file ({exc or type(exc).__name__})") from exc


@contextmanager
def _open_binary(uri: str, ledger: ReadLedger, gz: bool) -> Iterator[IO[bytes]]:
    """The file's bytes (decompressed for .gz), hashed by LEDGER as they are read (the compressed bytes)."""
    with ledger.stream(uri) as fh:
        yield gzip.GzipFile(fileobj=fh, mode="rb") if gz else fh  # type: ignore[misc]


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
    return RawRow(uri, row, None, "bad_row", f"row is a JSON {type(obj).__name__}, expected an object", _preview(raw))


def loads_limited(text: str, max_chars: int = MAX_EMBEDDED_JSON_CHARS, max_depth: int = MAX_EMBEDDED_JSON_DEPTH) -> Any:
    """json.loads for JSON embedded in a cell: ValueError (never RecursionError) past the size or depth limit."""
    if len(text) > max_chars:
        raise ValueError(f"embedded JSON has {len(text)} characters (limit {max_chars})")
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:  # nesting outside strings, counted before the parser can recurse
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > max_depth:
                raise ValueError(f"embedded JSON is nested more than {max_depth} levels deep")
        elif ch in "]}":
            depth -= 1
    try:
        return json.loads(text)
    except RecursionError as exc:  # pragma: no cover - the depth scan above refuses first
        raise ValueError("embedded JSON is nested too deeply") from exc


def _lines(fh: IO[bytes]) -> Iterator[str]:
    """Lines split at \\n, \\r\\n or a lone \\r; a BOM dropped; undecodable bytes kept as surrogate escapes."""
    text = io.TextIOWrapper(fh, encoding="utf-8-sig", errors="surrogateescape", newline=None)
    yield from text


def _iter_jsonl(uri: str, batch_rows: int, ledger: ReadLedger, gz: bool = False) -> Iterator[list[RawRow]]:
    batch: list[RawRow] = []
    with _open_binary(uri, ledger, gz) as fh:
        for line_no, line in enumerate(_lines(fh)):
            if not line.strip():
                continue
            line = line.rstrip("\n")
            bad = _ESCAPED_BYTE.search(line)
            if bad:
                byte = len(line[: bad.start()].encode("utf-8", errors="surrogateescape"))
                batch.append(
                    RawRow(
                        uri,
                        line_no,
                        None,
                        "bad_encoding",
                        f"line {line_no + 1} is not valid UTF-8 (byte {byte})",
                        _preview(line),
                    )
                )
            else:
                try:
                    obj = json.loads(line)
                except (ValueError, RecursionError) as exc:  # also a >4300-digit integer, nesting too deep
                    why = (
                        f"is not valid JSON: {exc.msg} at column {exc.colno}"
                        if isinstance(exc, json.JSONDecodeError)
                        else f"cannot be parsed: {exc}"
                    )
                    batch.append(RawRow(uri, line_no, None, "bad_json", f"line {line_no + 1} {why}", _preview(line)))
                else:
                    batch.append(_object_row(uri, line_no, obj, line))
            if len(batch) >= batch_rows:
                yield batch
                batch = []
    if batch:
        yield batch


def _json_rows(uri: str, obj: Any) -> list[Any]:
    """The rows of a parsed .json file: a list, an object holding one list of rows, or one row object."""
    if isinstance(obj, list):
        return obj
    if not isinstance(obj, dict):
        raise InputError(f"{uri}: a .json file must hold a list of rows, found a {type(obj).__name__}")
    row_lists = {k: v for k, v in obj.items() if isinstance(v, list) and v and isinstance(v[0], dict)}
    if len(row_lists) == 1:
        return next(iter(row_lists.values()))
    if len(row_lists) > 1:
        raise InputError(
            f"{uri}: a .json file must hold a list of rows (or an object with exactly one list); "
            f"found lists of rows under {', '.join(row_lists)}"
        )
    if any(isinstance(v, str) and v.strip() for v in obj.values()):
        return [obj]  # one problem per file (the original MATH distribution)
    raise InputError(f"{uri}: a .json file must hold a list of rows (or an object with exactly one list)")


def _iter_json(uri: str, batch_rows: int, ledger: ReadLedger, gz: bool = False) -> Iterator[list[RawRow]]:
    with _open_binary(uri, ledger, gz) as fh:
        data = fh.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{uri}: not valid UTF-8 (byte {exc.start}); a .json file must be UTF-8 text") from exc
    if not text.strip():
        raise InputError(f"{uri}: no rows (the file is empty)")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{uri}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            "if it holds one object per line, name it .jsonl"
        ) from exc
    except (ValueError, RecursionError) as exc:  # a >4300-digit integer, nesting too deep
        raise InputError(f"{uri}: cannot be parsed as JSON ({exc})") from exc
    rows = _json_rows(uri, obj)
    for start in range(0, len(rows), batch_rows):
        yield [
            _object_row(uri, start + i, item, json.dumps(item, default=str)[:300])
            for i, item in enumerate(rows[start : start + batch_rows])
        ]


def _iter_csv(
    uri: str, batch_rows: int, ledger: ReadLedger, gz: bool = False, max_record_lines: int = DEFAULT_MAX_RECORD_LINES
) -> Iterator[list[RawRow]]:
    with _open_binary(uri, ledger, gz) as fh:
        yield from iter_csv(uri, fh, batch_rows, max_record_lines, _preview)


def looks_like_hub_id(source: str) -> bool:
    return "://" not in source and not os.path.exists(source) and not source.startswith((".", "/", "~"))


def iter_hub_batches(dataset_id: str, split: str, batch_rows: int) -> Iterator[list[RawRow]]:
    """Rows of a Hugging Face dataset, from the local cache only (no network at run time)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        import datasets
    except ImportError as exc:
        raise InputError(
            f"{dataset_id}: not a local path, and the `datasets` package is not installed "
            "to load it as a Hugging Face dataset id"
        ) from exc
    try:
        ds = datasets.load_dataset(dataset_id, split=split)
    except Exception as exc:  # noqa: BLE001 - datasets raises many types; all mean "not usable here"
        raise InputError(
            f"{dataset_id}: no such local file, and not loadable as a Hugging Face dataset from the local cache "
            f"(split {split!r}; no network at run time): {type(exc).__name__}: {str(exc)[:200]}"
        ) from exc
    label = f"hf://{dataset_id}[{split}]"
    row = 0
    for batch in ds.iter(batch_size=batch_rows):
        names = list(batch)
        n = len(batch[names[0]]) if names else 0
        yield [RawRow(label, row + i, {k: batch[k][i] for k in names}) for i in range(n)]
        row += n
