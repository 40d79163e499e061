"""One storage layer for every stage: local paths, file://, s3:// and memory:// through fsspec.

Every write is atomic, so a crash never leaves a half-written artifact that a rerun would trust:
locally we write a temp file beside the target and `os.replace` it; on object stores the object
only appears when its single PUT (or multipart upload) completes.

S3-compatible stores (MinIO, moto, Ceph...) are configured from the environment:
`ADS_S3_ENDPOINT_URL` (or `AWS_ENDPOINT_URL`), and the usual `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_DEFAULT_REGION`. Credentials are never copied
into manifests, logs or error messages.

Errors a user must fix become a one-line `StorageError` naming the URI, the endpoint and the fix; transient
ones keep their types so stage retries see them. S3 client time is bounded from the environment. Both live in
`ads_core.storage_errors` and are re-exported here.

A build that holds its OUT's lock guards OUT (`ads_core.storage.fencing`): each write checks, right before
its rename or PUT, that the lock is still held with the build's token, else raises `LockLost`.

Local temp files are named `.<name>.<uuid>-<host>-<pid>.tmp<suffix>`; the first write into a folder in a
process removes our own leftovers there (`clean_stale_temps`), and published files get 0o666 & ~umask.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import logging
import os
import re
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from ads_core.storage.errors import (
    WRITE_ERRNOS,
    StorageError,
    _limit,
    endpoint_of,
    refuse_credentials,
    storage_options,
    translating,
)
from ads_core.storage.fencing import check_publish

log = logging.getLogger("ads.storage")
_HASH_CHUNK = 1 << 20
TEMP_GRACE_ENV = "ADS_TEMP_GRACE_S"

_S3_CLIENTS: dict[tuple[str, ...], fsspec.AbstractFileSystem] = {}


def _s3_cache_key(opts: dict[str, Any]) -> tuple[str, ...]:
    """One S3 client per process, endpoint, region and credential set (the secret only enters as a hash)."""
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "") + os.environ.get("AWS_SESSION_TOKEN", "")
    return (
        str(os.getpid()),
        str(opts.get("endpoint_url")),
        str(opts.get("client_kwargs")),
        str(opts.get("config_kwargs")),
        os.environ.get("ADS_S3_RETRIES", ""),
        os.environ.get("AWS_ACCESS_KEY_ID", ""),
        os.environ.get("AWS_PROFILE", ""),
        hashlib.sha256(secret.encode()).hexdigest(),
    )


def get_fs(uri: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """Filesystem and path inside it for any supported URI; S3 clients are reused (each costs ~0.3 s).

    A URI with credentials in it is refused (StorageError, without them)."""
    refuse_credentials(uri)
    opts = storage_options(uri)
    if not opts:
        return fsspec.core.url_to_fs(uri)
    key = _s3_cache_key(opts)
    fs = _S3_CLIENTS.get(key)
    if fs is None:
        fs = fsspec.filesystem("s3", **opts)
        fs.retries = _limit("ADS_S3_RETRIES")  # s3fs's own rounds around botocore's attempts
        _S3_CLIENTS[key] = fs
    return fs, fs._strip_protocol(uri)


def is_local(uri: str) -> bool:
    return isinstance(get_fs(uri)[0], LocalFileSystem)


def local_path(uri: str) -> Path:
    """Filesystem path of a local URI (plain path or file://)."""
    fs, path = get_fs(uri)
    if not isinstance(fs, LocalFileSystem):
        raise ValueError(f"{uri} is not on the local filesystem")
    return Path(path)


def join(base: str, *parts: str) -> str:
    """Join URI segments with '/', keeping the scheme of `base`."""
    out = base.rstrip("/")
    for part in parts:
        out = f"{out}/{part.strip('/')}"
    return out


def check_writable(out_uri: str) -> None:
    """Preflight before any work: OUT can be created and a file written (and removed) there, else StorageError.

    Costs one small PUT and DELETE on S3; it also finds a missing bucket, which a plain `exists` hides."""
    fs, path = get_fs(out_uri)
    probe = f"{path.rstrip('/')}/{_temp_name('ads-write-check')}"
    for attempt in range(4):  # a transient hiccup (reset, 5xx) is retried here: no task retries this call
        try:
            return _write_probe(fs, path, probe, out_uri)
        except StorageError:
            raise
        except OSError as exc:  # anything else the store says, still as one line once retries are spent
            if attempt == 3:
                raise StorageError(
                    out_uri,
                    f"cannot write there ({type(exc).__name__}: {exc})",
                    "check --out",
                    None if isinstance(fs, LocalFileSystem) else endpoint_of(out_uri),
                ) from exc
            time.sleep(0.5 * 2**attempt)


def _write_probe(fs: fsspec.AbstractFileSystem, path: str, probe: str, out_uri: str) -> None:
    with translating(out_uri):
        if isinstance(fs, LocalFileSystem):
            Path(path).mkdir(parents=True, exist_ok=True)
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            os.unlink(probe)
        else:
            fs.pipe_file(probe, b"")
            with contextlib.suppress(Exception):  # delete may be denied where writes are not: harmless
                fs.rm_file(probe)


# ---------------------------------------------------------------------------------------------
# our temp files: recognisable, removed on a later run, published with the umask's mode

_TEMP_RE = re.compile(
    r"^\.(?P<name>.+)\.(?:(?P<id>[0-9a-f]{32})-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)|[0-9a-z_]{8})"
    r"\.tmp(?:\.[A-Za-z0-9_]+)?$"
)  # the second form: names written before this scheme
_CLEANED: set[tuple[int, str]] = set()
_UMASK_LOCK = threading.Lock()


@functools.cache
def _host_tag() -> str:
    """This host and PID namespace (two containers on one host have separate PIDs), hashed."""
    parts = [socket.gethostname()]
    for probe in ("/proc/sys/kernel/random/boot_id", "/proc/self/ns/pid"):
        with contextlib.suppress(OSError):
            parts.append(Path(probe).read_text().strip() if "boot" in probe else str(os.stat(probe).st_ino))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8]


def _temp_name(name: str, suffix: str = "") -> str:
    return f".{name}.{uuid.uuid4().hex}-{_host_tag()}-{os.getpid()}.tmp{suffix}"


def is_our_temp(name: str) -> bool:
    return _TEMP_RE.match(name) is not None


def _writer_gone(match: re.Match[str]) -> bool:
    """True when the temp file's writer ran on this host/namespace and its PID no longer exists."""
    if match["host"] != _host_tag() or match["pid"] is None:
        return False
    try:
        os.kill(int(match["pid"]), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by someone else
        return False
    return False


def clean_stale_temps(directory: str, older_than_s: float | None = None) -> list[str]:
    """Remove our own leftover temp files in a local folder (not below it); returns their names.

    Only names our writers make; only when the writer is known dead (this host and PID namespace, PID gone)
    or the file is older than the grace period (ADS_TEMP_GRACE_S, default 3600 s), so a concurrent writer's
    live temp file survives. Other files and non-local folders are left alone."""
    if "://" in directory and not directory.startswith("file://"):
        return []
    grace = float(os.environ.get(TEMP_GRACE_ENV, "3600")) if older_than_s is None else older_than_s
    removed: list[str] = []
    try:
        entries = list(os.scandir(directory.removeprefix("file://")))
    except (FileNotFoundError, NotADirectoryError):
        return []
    now = time.time()
    for entry in entries:
        match = _TEMP_RE.match(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        with contextlib.suppress(FileNotFoundError, PermissionError):
            age = now - entry.stat(follow_symlinks=False).st_mtime
            if age > grace or _writer_gone(match):
                os.unlink(entry.path)
                removed.append(entry.name)
    if removed:
        log.info("removed %d stale temp file(s) from %s: %s", len(removed), directory, ", ".join(sorted(removed)))
    return removed


def _clean_once(folder: Path) -> None:
    """The first write into a folder in this process clears our leftovers there (a listdir; errors ignored)."""
    key = (os.getpid(), str(folder))
    if key not in _CLEANED:
        _CLEANED.add(key)
        with contextlib.suppress(OSError):
            clean_stale_temps(str(folder))


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    with _UMASK_LOCK:  # no /proc: os.umask is the only way to read it
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a normal new file gets here (0o666 & ~umask); every artifact is published with it."""
    return 0o666 & ~_umask()


def exists(uri: str) -> bool:
    with translating(uri):
        fs, path = get_fs(uri)
        return fs.exists(path)


def read_bytes(uri: str) -> bytes:
    with translating(uri):
        fs, path = get_fs(uri)
        return fs.cat_file(path)


def write_bytes(uri: str, data: bytes) -> None:
    """Atomically write bytes: temp file + rename locally (mode 0o666 & ~umask), a single PUT remotely."""
    with translating(uri):
        fs, path = get_fs(uri)
        if not isinstance(fs, LocalFileSystem):
            check_publish(uri)  # a build that lost its OUT lock publishes nothing (fencing.py)
            fs.pipe_file(path, data)
            return
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        _clean_once(target.parent)
        tmp = target.parent / _temp_name(target.name)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)  # umask applies
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            check_publish(uri)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


@contextlib.contextmanager
def atomic_local_file(uri: str, suffix: str = "") -> Iterator[Path]:
    """Yield a local temp path; on clean exit it becomes `uri` in one atomic step.

    Use it for writers that stream (a ParquetWriter, np.save): locally the temp file sits beside
    the target and is renamed (with mode 0o666 & ~umask); remotely it is uploaded with one put once complete.
    """
    fs, path = get_fs(uri)
    local = isinstance(fs, LocalFileSystem)
    with translating(uri):
        if local:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            folder, name = target.parent, target.name
        else:
            folder, name = Path(tempfile.gettempdir()), "ads-upload"
        _clean_once(folder)
    tmp = folder / _temp_name(name, suffix)
    try:
        try:
            yield tmp
        except OSError as exc:  # the writer's own write into the temp file (a full disk) is about `uri`
            if exc.errno not in WRITE_ERRNOS or exc.filename not in (None, str(tmp)):
                raise  # e.g. the source a stage reads while it writes: that error names its own file
            with translating(uri):
                raise OSError(exc.errno, exc.strerror, str(target if local else uri)) from exc
        with translating(uri):
            if local:
                with open(tmp, "rb") as fh:  # data on disk before the rename, as write_bytes does
                    os.fsync(fh.fileno())
                os.chmod(tmp, file_mode())  # whatever mode the writer's library chose
                check_publish(uri)
                os.replace(tmp, target)
            else:
                check_publish(uri)
                fs.put_file(str(tmp), path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


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
