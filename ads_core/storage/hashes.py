"""Content hashes of files, folders and bytes: the cache keys of every later stage build on them."""

from __future__ import annotations

import hashlib

from ads_core.storage.errors import (
    translating,
)
from ads_core.storage.fs import get_fs

_HASH_CHUNK = 1 << 20


def content_hash(uri: str) -> str:
    """sha256 of a file's bytes, streamed; the cache keys of every later stage build on it."""
    with translating(uri):
        fs, path = get_fs(uri)
        digest = hashlib.sha256()
        with fs.open(path, "rb") as fh:
            while chunk := fh.read(_HASH_CHUNK):
                digest.update(chunk)
        return "sha256:" + digest.hexdigest()


def tree_hash(uri: str, suffixes: tuple[str, ...] | None = None) -> str:
    """Content hash of a file, or of every file below a directory (names and bytes)."""
    with translating(uri):
        fs, path = get_fs(uri)
        if not fs.isdir(path):
            return content_hash(uri)
        digest = hashlib.sha256()
        for file in sorted(fs.find(path)):
            if suffixes and not file.endswith(suffixes):
                continue
            rel = file[len(path.rstrip("/")) + 1 :]
            digest.update(rel.encode() + b"\0")
            with fs.open(file, "rb") as fh:
                while chunk := fh.read(_HASH_CHUNK):
                    digest.update(chunk)
        return "sha256:" + digest.hexdigest()


def bytes_hash(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
