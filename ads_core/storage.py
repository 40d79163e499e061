"""One storage layer for every stage: local paths, file://, s3:// and memory:// through fsspec.

Every write is atomic, so a crash never leaves a half-written artifact that a rerun would trust:
locally we write a temp file beside the target and `os.replace` it; on object stores the object
only appears when its single PUT (or multipart upload) completes.

S3-compatible stores (MinIO, moto, Ceph...) are configured from the environment:
`ADS_S3_ENDPOINT_URL` (or `AWS_ENDPOINT_URL`), and the usual `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_DEFAULT_REGION`. Credentials are never copied
into manifests, logs or error messages.

Errors a user must fix (missing bucket, unreachable endpoint, bad or partial credentials, permission
denied, a file where a folder should be) become a one-line `StorageError` naming the URI, the endpoint and
the fix; transient ones (resets, 5xx, throttling) keep their types so the stage retry logic retries them.
Client time is bounded: `ADS_S3_CONNECT_TIMEOUT` (s, default 2), `ADS_S3_READ_TIMEOUT` (s, default 15),
`ADS_S3_MAX_ATTEMPTS` (botocore attempts per request, default 3) and `ADS_S3_RETRIES` (s3fs rounds, default
2), so a dead endpoint fails within about 15 s.

Local temp files are named `.<name>.<uuid>-<host>-<pid>.tmp<suffix>`; the first write into a folder in a
process removes our own leftovers there (`clean_stale_temps`), and published files get 0o666 & ~umask.
"""

from __future__ import annotations

import contextlib
import errno
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

log = logging.getLogger("ads.storage")
_HASH_CHUNK = 1 << 20
TEMP_GRACE_ENV = "ADS_TEMP_GRACE_S"
_S3_LIMITS = {"ADS_S3_CONNECT_TIMEOUT": 2.0, "ADS_S3_READ_TIMEOUT": 15.0, "ADS_S3_MAX_ATTEMPTS": 3, "ADS_S3_RETRIES": 2}


class StorageError(Exception):
    """A storage problem no retry fixes; one line with the URI, the endpoint (never credentials) and the fix."""

    def __init__(self, uri: str, problem: str, fix: str, endpoint: str | None = None) -> None:
        self.uri, self.problem, self.fix, self.endpoint = uri, problem, fix, endpoint
        where = f" (endpoint {endpoint})" if endpoint else ""
        super().__init__(" ".join(f"storage error at {uri}{where}: {problem}; {fix}".split()))


def _limit(name: str) -> Any:
    default = _S3_LIMITS[name]
    raw = os.environ.get(name, "").strip()
    try:
        value = type(default)(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if value <= 0:
        raise ValueError(f"{name}={raw!r} must be positive")
    return value


def storage_options(uri: str) -> dict[str, Any]:
    """fsspec options for a URI; for s3 the endpoint comes from the environment."""
    if uri.startswith(("s3://", "s3a://")):
        opts: dict[str, Any] = {}
        endpoint = os.environ.get("ADS_S3_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            opts["endpoint_url"] = endpoint
        region = os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION")
        if region:
            opts["client_kwargs"] = {"region_name": region}
        opts["config_kwargs"] = {  # bounded: a dead endpoint must fail in seconds, not minutes
            "connect_timeout": _limit("ADS_S3_CONNECT_TIMEOUT"), "read_timeout": _limit("ADS_S3_READ_TIMEOUT"),
            "retries": {"max_attempts": _limit("ADS_S3_MAX_ATTEMPTS"), "mode": "standard"}}
        # fsspec's own instance cache ignores credentials taken from the environment; ours keys on them.
        opts["skip_instance_cache"] = True
        return opts
    return {}


_S3_CLIENTS: dict[tuple[str, ...], fsspec.AbstractFileSystem] = {}


def _s3_cache_key(opts: dict[str, Any]) -> tuple[str, ...]:
    """One S3 client per process, endpoint, region and credential set (the secret only enters as a hash)."""
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "") + os.environ.get("AWS_SESSION_TOKEN", "")
    return (str(os.getpid()), str(opts.get("endpoint_url")), str(opts.get("client_kwargs")),
            str(opts.get("config_kwargs")), os.environ.get("ADS_S3_RETRIES", ""),
            os.environ.get("AWS_ACCESS_KEY_ID", ""),
            os.environ.get("AWS_PROFILE", ""), hashlib.sha256(secret.encode()).hexdigest())


def get_fs(uri: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """Filesystem and path inside it for any supported URI; S3 clients are reused (each costs ~0.3 s)."""
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


# ---------------------------------------------------------------------------------------------
# errors a user must fix


_CREDENTIAL_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken",
                     "InvalidClientTokenId", "TokenRefreshRequired", "AuthorizationHeaderMalformed"}
_DENIED_CODES = {"AccessDenied", "AllAccessDisabled", "403", "Forbidden"}
_CONNECT_FAILURES = {"ClientConnectorError", "ClientConnectorDNSError", "ConnectTimeoutError", "NewConnectionError",
                     "ConnectionTimeoutError"}  # connect never succeeded; resets after connect stay transient
_LOCAL_ERRNOS = {errno.ENOSPC: ("no space left on the device", "free space or choose another --out"),
                 errno.EDQUOT: ("disk quota exceeded", "free space or choose another --out"),
                 errno.EROFS: ("the filesystem is read-only", "choose a writable --out")}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, its causes/contexts and the errors botocore wraps (`kwargs['error']`)."""
    todo, seen = [exc], set()
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        wrapped = getattr(e, "kwargs", None)
        todo += [x for x in (e.__cause__, e.__context__, wrapped.get("error") if isinstance(wrapped, dict) else None)
                 if isinstance(x, BaseException)]


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def endpoint_of(uri: str) -> str:
    """The S3 endpoint a URI is served from, without any user:password part."""
    endpoint = storage_options(uri).get("endpoint_url") or "the AWS default endpoint"
    return re.sub(r"//[^/@]*@", "//", endpoint)


def _file_in_the_way(path: str) -> str | None:
    """The nearest existing ancestor of `path` (or itself) when it is a file rather than a folder."""
    for candidate in (Path(path), *Path(path).parents):
        if candidate.exists() or candidate.is_symlink():
            return None if candidate.is_dir() else str(candidate)
    return None


def as_storage_error(exc: BaseException, uri: str) -> StorageError | None:
    """The user-facing StorageError for `exc` raised while using `uri`, or None when it is not one (a missing
    key, a transient reset/5xx/throttle, a bug): those keep their type so callers and retries see them."""
    if isinstance(exc, StorageError):
        return exc
    chain = list(_chain(exc))
    if uri.startswith(("s3://", "s3a://")):
        endpoint, bucket = endpoint_of(uri), uri.split("://", 1)[1].split("/", 1)[0]
        codes = {_code(e) for e in chain} - {""}
        names = {type(e).__name__ for e in chain}
        if "NoSuchBucket" in codes or any("bucket does not exist" in str(e) for e in chain):
            return StorageError(uri, f"bucket {bucket!r} does not exist", "create it or fix the bucket in --out",
                                endpoint)
        if names & {"PartialCredentialsError", "NoCredentialsError"}:
            return StorageError(uri, "the credentials are missing or incomplete",
                                "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)", endpoint)
        if codes & _CREDENTIAL_CODES:
            return StorageError(uri, f"the credentials were rejected ({', '.join(sorted(codes & _CREDENTIAL_CODES))})",
                                "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN", endpoint)
        if codes & _DENIED_CODES or any(isinstance(e, PermissionError) for e in chain):
            return StorageError(uri, f"permission denied ({', '.join(sorted(codes & _DENIED_CODES)) or 'denied'})",
                                "use credentials allowed to read and write this bucket, or another --out", endpoint)
        if names & _CONNECT_FAILURES or any(isinstance(e, (ConnectionRefusedError, socket.gaierror)) for e in chain):
            return StorageError(uri, "the endpoint is unreachable (connection failed after bounded retries)",
                                "check ADS_S3_ENDPOINT_URL / AWS_ENDPOINT_URL and that the store is running", endpoint)
        return None
    if "://" in uri and not uri.startswith("file://"):
        return None
    path = uri.removeprefix("file://")
    if isinstance(exc, (NotADirectoryError, FileExistsError)) and (blocker := _file_in_the_way(path)):
        return StorageError(uri, f"{blocker} is a file, not a folder", "choose another --out or move that file away")
    if isinstance(exc, IsADirectoryError):
        return StorageError(uri, f"{exc.filename or path} is a folder, not a file", "move that folder away")
    if isinstance(exc, PermissionError):
        return StorageError(uri, f"permission denied on {exc.filename or path}",
                            "fix the folder's permissions or choose another --out")
    if isinstance(exc, OSError) and exc.errno in _LOCAL_ERRNOS:
        problem, fix = _LOCAL_ERRNOS[exc.errno]
        return StorageError(uri, problem, fix)
    return None


def _translated(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Raise StorageError instead of the user-fixable errors `fn(uri, ...)` meets; everything else unchanged."""
    @functools.wraps(fn)
    def wrapper(uri: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(uri, *args, **kwargs)
        except Exception as exc:
            err = as_storage_error(exc, uri)
            if err is None or err is exc:
                raise
            raise err from exc
    return wrapper


@contextlib.contextmanager
def _translating(uri: str) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        err = as_storage_error(exc, uri)
        if err is None or err is exc:
            raise
        raise err from exc


def check_writable(out_uri: str) -> None:
    """Preflight before any work: OUT can be created and a file written (and removed) there, else StorageError.

    Costs one small PUT and DELETE on S3; it also finds a missing bucket, which a plain `exists` hides."""
    fs, path = get_fs(out_uri)
    probe = f"{path.rstrip('/')}/{_temp_name('ads-write-check')}"
    try:
        with _translating(out_uri):
            if isinstance(fs, LocalFileSystem):
                Path(path).mkdir(parents=True, exist_ok=True)
                os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
                os.unlink(probe)
            else:
                fs.pipe_file(probe, b"")
                with contextlib.suppress(Exception):  # delete may be denied where writes are not: harmless
                    fs.rm_file(probe)
    except StorageError:
        raise
    except OSError as exc:  # anything else the store says, still as one line
        raise StorageError(out_uri, f"cannot write there ({type(exc).__name__}: {exc})", "check --out",
                           None if isinstance(fs, LocalFileSystem) else endpoint_of(out_uri)) from exc


# ---------------------------------------------------------------------------------------------
# our temp files: recognisable, removed on a later run, published with the umask's mode

_TEMP_RE = re.compile(r"^\.(?P<name>.+)\.(?:(?P<id>[0-9a-f]{32})-(?P<host>[0-9a-f]{8})-(?P<pid>\d+)|[0-9a-z_]{8})"
                      r"\.tmp(?:\.[A-Za-z0-9_]+)?$")  # the second form: names written before this scheme
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


@_translated
def exists(uri: str) -> bool:
    fs, path = get_fs(uri)
    return fs.exists(path)


@_translated
def makedirs(uri: str) -> None:
    fs, path = get_fs(uri)
    fs.makedirs(path, exist_ok=True)


@_translated
def read_bytes(uri: str) -> bytes:
    fs, path = get_fs(uri)
    return fs.cat_file(path)


@_translated
def write_bytes(uri: str, data: bytes) -> None:
    """Atomically write bytes: temp file + rename locally (mode 0o666 & ~umask), a single PUT remotely."""
    fs, path = get_fs(uri)
    if not isinstance(fs, LocalFileSystem):
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
    with _translating(uri):
        if local:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            folder, name = target.parent, target.name
        else:
            folder, name = Path(tempfile.gettempdir()), "ads-upload"
        _clean_once(folder)
    tmp = folder / _temp_name(name, suffix)
    try:
        yield tmp
        with _translating(uri):
            if local:
                with open(tmp, "rb") as fh:  # data on disk before the rename, as write_bytes does
                    os.fsync(fh.fileno())
                os.chmod(tmp, file_mode())  # whatever mode the writer's library chose
                os.replace(tmp, target)
            else:
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


@_translated
def read_parquet(uri: str, columns: list[str] | None = None) -> pa.Table:
    fs, path = get_fs(uri)
    with fs.open(path, "rb") as fh:
        return pq.read_table(fh, columns=columns)


@_translated
def parquet_num_rows(uri: str) -> int:
    fs, path = get_fs(uri)
    with fs.open(path, "rb") as fh:
        return pq.ParquetFile(fh).metadata.num_rows


@_translated
def content_hash(uri: str) -> str:
    """sha256 of a file's bytes, streamed; the cache keys of every later stage build on it."""
    fs, path = get_fs(uri)
    digest = hashlib.sha256()
    with fs.open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


@_translated
def tree_hash(uri: str, suffixes: tuple[str, ...] | None = None) -> str:
    """Content hash of a file, or of every file below a directory (names and bytes)."""
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
