"""Where a URI lives: the fsspec file system and path for local paths, file://, s3:// and memory://, one S3 client
per endpoint and credential set (configured from the environment), (the writability probe of an OUT is in `atomic`)."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from ads_core.storage.errors import (
    _limit,
    refuse_credentials,
    storage_options,
)

log = logging.getLogger("ads.storage")

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
