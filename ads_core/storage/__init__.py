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
`ads_core.storage.errors` and are re-exported here.

A build that holds its OUT's lock guards OUT (`ads_core.storage.fencing`): each write checks, right before
its rename or PUT, that the lock is still held with the build's token, else raises `LockLost`.

Local temp files are named `.<name>.<uuid>-<host>-<pid>.tmp<suffix>`; the first write into a folder in a
process removes our own leftovers there (`clean_stale_temps`), and published files get 0o666 & ~umask.

The code lives in named modules (`fs`: file systems and paths; `atomic`: atomic writes and temp files; `tables`:
JSON and Parquet; `hashes`: content hashes); this package re-exports them, so `storage.read_parquet(uri)` works.
"""

from __future__ import annotations

from ads_core.storage.atomic import (
    TEMP_GRACE_ENV,
    _temp_name,
    atomic_local_file,
    check_writable,
    clean_stale_temps,
    exists,
    file_mode,
    is_our_temp,
    read_bytes,
    write_bytes,
)
from ads_core.storage.errors import (
    WRITE_ERRNOS,
    StorageError,
    endpoint_of,
    refuse_credentials,
    storage_options,
    translating,
)
from ads_core.storage.fs import get_fs, is_local, join, local_path
from ads_core.storage.hashes import bytes_hash, content_hash, tree_hash
from ads_core.storage.tables import parquet_num_rows, read_json, read_parquet, write_json, write_parquet

__all__ = [
    "TEMP_GRACE_ENV",
    "WRITE_ERRNOS",
    "StorageError",
    "_temp_name",
    "atomic_local_file",
    "bytes_hash",
    "check_writable",
    "clean_stale_temps",
    "content_hash",
    "endpoint_of",
    "exists",
    "file_mode",
    "get_fs",
    "is_local",
    "is_our_temp",
    "join",
    "local_path",
    "parquet_num_rows",
    "read_bytes",
    "read_json",
    "read_parquet",
    "refuse_credentials",
    "storage_options",
    "translating",
    "tree_hash",
    "write_bytes",
    "write_json",
    "write_parquet",
]
