"""Build locks in an object store (S3, MinIO), for builds and Dask workers on machines that share no folder.

The same four calls as the folder store (`store.LockStore`), one object per generation,
`<root>/<key>/<N>.json`. Taking generation N is a conditional PUT (`If-None-Match: *`): the store creates
the object only if no object has that key, so of two machines that try at once exactly one gets N. Renewals
and the release rewrite only the holder's own generation; old generations are deleted by the next holder.
Listings are always fresh (`refresh=True`): a cached listing could hide a newer generation.

A store that ignores `If-None-Match` would let two builds both "create" N. It is refused once per process
with one line (a probe object is created twice), and every create reads its record back, so a build whose
record was overwritten meanwhile does not believe it holds the lock.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from typing import Any

from ads_core import storage
from ads_core.locks.store import LOCK_DIR_ENV, Generation, LockSettingsError

_GENERATION = re.compile(r"(\d{12})\.json$")
_PROBED: dict[str, bool] = {}
_PROBE_LOCK = threading.Lock()


class ObjectLockStore:
    """Locks under an object-store prefix (see the module docstring); `location` is that prefix's URI."""

    def __init__(self, root: str) -> None:
        self.location = root.rstrip("/")

    def _uri(self, key: str, number: int | None = None) -> str:
        return f"{self.location}/{key}" + (f"/{number:012d}.json" if number is not None else "")

    def _listing(self, key: str) -> list[tuple[int, dict[str, Any]]]:
        fs, path = storage.get_fs(self._uri(key))
        with storage.translating(self._uri(key)):
            try:
                entries = fs.ls(path, detail=True, refresh=True)
            except FileNotFoundError:
                return []
        found = [(_GENERATION.search(e["name"]), e) for e in entries if e.get("type") == "file"]
        return sorted((int(m[1]), e) for m, e in found if m)

    def newest(self, key: str) -> Generation | None:
        fs, _ = storage.get_fs(self.location)
        for number, entry in reversed(self._listing(key)):
            try:
                data = fs.cat_file(entry["name"])
            except FileNotFoundError:  # pruned meanwhile: the next newest
                continue
            try:
                record = json.loads(data)
            except ValueError:
                record = {}
            modified = entry.get("LastModified")
            age = max(time.time() - modified.timestamp(), 0.0) if hasattr(modified, "timestamp") else 0.0
            return Generation(number, record if isinstance(record, dict) else {}, age)
        return None

    def create(self, key: str, number: int, record: dict[str, Any]) -> bool:
        self._check_conditional_writes()
        uri = self._uri(key, number)
        fs, path = storage.get_fs(uri)
        with storage.translating(uri):
            try:
                fs.pipe_file(path, json.dumps(record).encode(), mode="create")  # PUT If-None-Match: *
            except FileExistsError:
                return False
            try:
                back = json.loads(fs.cat_file(path))
            except (FileNotFoundError, ValueError):
                return False
        return isinstance(back, dict) and back.get("nonce") == record.get("nonce")

    def rewrite(self, key: str, number: int, record: dict[str, Any]) -> None:
        uri = self._uri(key, number)
        fs, path = storage.get_fs(uri)
        with storage.translating(uri):
            fs.pipe_file(path, json.dumps(record).encode())

    def prune(self, key: str, below: int) -> None:
        fs, _ = storage.get_fs(self.location)
        old = [entry["name"] for number, entry in self._listing(key) if number < below]
        if old:
            try:
                fs.rm(old)
            except FileNotFoundError:  # another holder pruned them first
                pass

    def keys(self) -> list[str]:
        """Every lock ever taken here (for tests and diagnostics)."""
        fs, path = storage.get_fs(self.location)
        try:
            return sorted(e.rsplit("/", 1)[-1] for e in fs.ls(path, detail=False, refresh=True))
        except FileNotFoundError:
            return []

    def _check_conditional_writes(self) -> None:
        """Once per process and store: a probe created twice must be refused the second time."""
        with _PROBE_LOCK:
            if _PROBED.get(self.location):
                return
            uri = f"{self.location}/.probe-{uuid.uuid4().hex}"
            fs, path = storage.get_fs(uri)
            with storage.translating(uri):
                fs.pipe_file(path, b"{}", mode="create")
                try:
                    fs.pipe_file(path, b"{}", mode="create")
                    honoured = False
                except FileExistsError:
                    honoured = True
                finally:
                    fs.rm(path)
            if not honoured:
                raise LockSettingsError(
                    f"the object store of {self.location} ({storage.endpoint_of(self.location)}) ignores "
                    f"conditional writes (If-None-Match), so it cannot hold build locks; set {LOCK_DIR_ENV} "
                    "to a folder every machine shares"
                )
            _PROBED[self.location] = True
