"""Atomic writes: locally a temp file beside the target, `os.replace`d (fsynced, fenced by the build's lock); on object
stores one PUT. Our temp files are recognisable, removed by a later run, and published with the umask's mode; the
writability probe of an OUT (`check_writable`) writes one of them."""

from __future__ import annotations

import contextlib
import functools
import hashlib
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

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ads_core.common.envvars import seconds_from_env
from ads_core.storage.errors import WRITE_ERRNOS, StorageError, endpoint_of, translating
from ads_core.storage.fencing import check_publish
from ads_core.storage.fs import get_fs

log = logging.getLogger("ads.storage")
TEMP_GRACE_ENV = "ADS_TEMP_GRACE_S"


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
    grace = seconds_from_env(TEMP_GRACE_ENV, 3600.0) if older_than_s is None else older_than_s
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
