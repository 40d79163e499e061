"""What a reader yields, one `RawRow` per physical record, and what it consumed, in a `ReadLedger`.

Shared by the text readers (`readers`, `csv_rows`), the columnar ones (`arrow`) and the source listing (`sources`).

The ledger hashes the bytes each reader consumes, in the same pass (text formats pass through a hashing
wrapper; Parquet and Arrow files, read at random offsets, are hashed in one sequential pass over the same open
file). Each file's size and modification stamp are taken before and after: a file that changed while it was
read raises `SourceChanged`, and the format stage reads the source again. The digest of what was read keys the
format stage, so a build is always described by the bytes it actually turned into rows.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

from ads_core import storage

_GZ = (".jsonl.gz", ".ndjson.gz", ".json.gz", ".csv.gz")
SUPPORTED_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".parquet", ".arrow", *_GZ)
_CHUNK = 1 << 20


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


class SourceChanged(Exception):
    """A source file changed while it was read: what was read describes no single version of it."""

    def __init__(self, uri: str, why: str) -> None:
        super().__init__(f"{uri} changed while it was read ({why})")
        self.uri, self.why = uri, why


class _HashingRaw(io.RawIOBase):
    """A raw stream over an open file that hashes and counts every byte read through it."""

    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh
        self.sha = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._fh.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.sha.update(data)
        self.size += n
        return n

    def drain(self) -> None:
        """Read to the end, so the hash covers the whole file even where a parser stopped early."""
        while data := self._fh.read(_CHUNK):
            self.sha.update(data)
            self.size += len(data)


def file_stamp(uri: str) -> tuple[Any, ...]:
    """What changes when a file is rewritten or appended to: size, mtime, inode (locally), ETag (object stores)."""
    try:
        with storage.translating(uri, reading=True):
            fs, path = storage.get_fs(uri)
            if hasattr(fs, "invalidate_cache"):
                fs.invalidate_cache(path)  # s3fs answers `info` from its listing cache otherwise
            info = fs.info(path)
    except FileNotFoundError:  # listed a moment ago: it was removed or replaced while the source was read
        raise SourceChanged(uri, "it was removed while the source was read") from None
    return tuple(info.get(k) for k in ("size", "mtime", "ino", "ETag", "LastModified", "created"))


def combine(files: list[tuple[str, str]]) -> str:
    """The digest of a source from its files' names (relative to SOURCE) and content hashes, in read order."""
    digest = hashlib.sha256()
    for name, sha in files:
        digest.update(f"{name}\0{sha}\n".encode())
    return "sha256:" + digest.hexdigest()


def relative_name(source: str, file: str) -> str:
    """FILE's name relative to a directory SOURCE; a single-file SOURCE is named by its base name."""
    root = storage.get_fs(source)[1].rstrip("/") + "/"
    path = storage.get_fs(file)[1]
    return path.removeprefix(root) if path.startswith(root) else path.rsplit("/", 1)[-1]


@dataclass
class ReadLedger:
    """The files of one source as they were read: their names and the sha256 of the bytes consumed."""

    source: str
    files: list[tuple[str, str]] = field(default_factory=list)
    bytes_read: int = 0

    def digest(self) -> str:
        return combine(self.files)

    def _check(self, uri: str, before: tuple[Any, ...], size: int) -> None:
        after = file_stamp(uri)
        if after != before:
            raise SourceChanged(uri, f"size/modification time went from {before[:2]} to {after[:2]}")
        if after[0] is not None and after[0] != size:
            raise SourceChanged(uri, f"{size} bytes read, the file now has {after[0]}")

    def _done(self, uri: str, sha: str, size: int) -> None:
        self.files.append((relative_name(self.source, uri), "sha256:" + sha))
        self.bytes_read += size

    @contextmanager
    def stream(self, uri: str) -> Iterator[IO[bytes]]:
        """A buffered binary stream of URI that hashes what is read; checked for changes at the end."""
        before = file_stamp(uri)
        fs, path = storage.get_fs(uri)
        with storage.translating(uri, reading=True), fs.open(path, "rb") as fh:
            raw = _HashingRaw(fh)
            yield io.BufferedReader(raw, _CHUNK)
            raw.drain()
        self._check(uri, before, raw.size)
        self._done(uri, raw.sha.hexdigest(), raw.size)

    @contextmanager
    def random_access(self, uri: str) -> Iterator[IO[bytes]]:
        """An open file for a parser that seeks (Parquet): hashed in one pass first, checked for changes at the end."""
        before = file_stamp(uri)
        fs, path = storage.get_fs(uri)
        with storage.translating(uri, reading=True), fs.open(path, "rb") as fh:
            sha, size = hashlib.sha256(), 0
            while data := fh.read(_CHUNK):
                sha.update(data)
                size += len(data)
            fh.seek(0)
            yield fh
        self._check(uri, before, size)
        self._done(uri, sha.hexdigest(), size)

    def whole(self, uri: str) -> bytes:
        """The bytes of URI (Arrow IPC files are parsed from memory), hashed as read."""
        before = file_stamp(uri)
        data = storage.read_bytes(uri)
        self._check(uri, before, len(data))
        self._done(uri, hashlib.sha256(data).hexdigest(), len(data))
        return data
