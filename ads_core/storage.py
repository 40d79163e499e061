"""One storage layer for every stage: local paths, file://, s3:// and memory:// through fsspec.

Every write is atomic, so a crash never leaves a half-written artifact that a rerun would trust:
locally we write a temp file beside the target and `os.replace` it; on object stores the object
only appears when its single PUT (or multipart upload) completes.

S3-compatible stores (MinIO, moto, Ceph...) are configured from the environment:
`ADS_S3_ENDPOINT_URL` (or `AWS_ENDPOINT_URL`), and the usual `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_DEFAULT_REGION`. Credentials are never copied
into manifests or logs.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

_HASH_CHUNK = 1 << 20


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
        # fsspec's own instance cache ignores credentials taken from the environment; ours keys on them.
        opts["skip_instance_cache"] = True
        return opts
    return {}


_S3_CLIENTS: dict[tuple[str, ...], fsspec.AbstractFileSystem] = {}


def _s3_cache_key(opts: dict[str, Any]) -> tuple[str, ...]:
    """One S3 client per process, endpoint, region and credential set (the secret only enters as a hash)."""
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "") + os.environ.get("AWS_SESSION_TOKEN", "")
    return (str(os.getpid()), str(opts.get("endpoint_url")), str(opts.get("client_kwargs")),
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
        fs = _S3_CLIENTS[key] = fsspec.filesystem("s3", **opts)
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


def exists(uri: str) -> bool:
    fs, path = get_fs(uri)
    return fs.exists(path)


def makedirs(uri: str) -> None:
    fs, path = get_fs(uri)
    fs.makedirs(path, exist_ok=True)


def read_bytes(uri: str) -> bytes:
    fs, path = get_fs(uri)
    return fs.cat_file(path)


def write_bytes(uri: str, data: bytes) -> None:
    """Atomically write bytes: temp file + rename locally, a single PUT remotely."""
    fs, path = get_fs(uri)
    if isinstance(fs, LocalFileSystem):
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
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
    else:
        fs.pipe_file(path, data)


@contextlib.contextmanager
def atomic_local_file(uri: str, suffix: str = "") -> Iterator[Path]:
    """Yield a local temp path; on clean exit it becomes `uri` in one atomic step.

    Use it for writers that stream (a ParquetWriter, np.save): locally the temp file sits beside
    the target and is renamed; remotely it is uploaded with one put once complete.
    """
    fs, path = get_fs(uri)
    local = isinstance(fs, LocalFileSystem)
    if local:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.{uuid.uuid4().hex[:8]}.tmp{suffix}"
    else:
        tmp = Path(tempfile.gettempdir()) / f"ads-{uuid.uuid4().hex}{suffix}"
    try:
        yield tmp
        if local:
            with open(tmp, "rb") as fh:  # data on disk before the rename, as write_bytes does
                os.fsync(fh.fileno())
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


def read_parquet(uri: str, columns: list[str] | None = None) -> pa.Table:
    fs, path = get_fs(uri)
    with fs.open(path, "rb") as fh:
        return pq.read_table(fh, columns=columns)


def parquet_num_rows(uri: str) -> int:
    fs, path = get_fs(uri)
    with fs.open(path, "rb") as fh:
        return pq.ParquetFile(fh).metadata.num_rows


def content_hash(uri: str) -> str:
    """sha256 of a file's bytes, streamed; the cache keys of every later stage build on it."""
    fs, path = get_fs(uri)
    digest = hashlib.sha256()
    with fs.open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


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
