"""Content identity of a policy model, for cache keys: weights fine-tuned in place must change it.

A local directory is keyed by the sha256 of every file in it (weights included). Hashing a multi-GB
checkpoint costs seconds to minutes, so each file's digest is memoised by (path, size, mtime_ns)
in `<ADS cache dir>/fingerprints.json`: a rebuild re-hashes only files that were rewritten. A hub
id is keyed by the commit of its locally cached snapshot.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path

from ads_core.common import defaults

MEMO_NAME = "fingerprints.json"
_CHUNK = 8 << 20
_lock = threading.Lock()


def _memo_path() -> Path:
    return defaults.cache_dir() / MEMO_NAME


def _load_memo() -> dict[str, str]:
    try:
        data = json.loads(_memo_path().read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _save_memo(memo: dict[str, str]) -> None:
    path = _memo_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".fingerprints.", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(memo, fh, sort_keys=True)
        os.replace(tmp, path)
    except OSError:  # a read-only cache dir only costs re-hashing next time
        pass


def file_digest(path: Path, memo: dict[str, str] | None = None) -> str:
    """sha256 of one file, reused from `memo` while its size and mtime are unchanged."""
    stat = path.stat()
    key = f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}"
    if memo is not None and key in memo:
        return memo[key]
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    value = digest.hexdigest()
    if memo is not None:
        memo[key] = value
    return value


def memoised_digest(path: Path) -> str:
    """sha256 of one file, memoised across processes in the fingerprint memo (path, size, mtime)."""
    with _lock:
        memo = _load_memo()
        before = dict(memo)
        value = file_digest(path, memo)
        if memo != before:
            _save_memo(memo)
    return value


def directory_fingerprint(directory: Path) -> str:
    """sha256 over (relative name, content digest) of every file under `directory`."""
    with _lock:
        memo = _load_memo()
        before = dict(memo)
        digest = hashlib.sha256()
        for file in sorted(p for p in directory.rglob("*") if p.is_file()):
            rel = file.relative_to(directory).as_posix()
            if rel.startswith(".") or "/." in rel:  # caches and temp files of tools, not the model
                continue
            digest.update(f"{rel}\0{file_digest(file, memo)}\0".encode())
        if memo != before:
            _save_memo(memo)
    return "sha256:" + digest.hexdigest()
