"""Storage errors a user must fix, and the bounded S3 client settings whose endpoint those errors name.

Errors a user must fix (missing bucket, unreachable endpoint, bad or partial credentials, permission
denied, a file where a folder should be) become a one-line `StorageError` naming the URI, the endpoint and
the fix; transient ones (resets, 5xx, throttling) keep their types so the stage retry logic retries them.
Client time is bounded: `ADS_S3_CONNECT_TIMEOUT` (s, default 2), `ADS_S3_READ_TIMEOUT` (s, default 15),
`ADS_S3_MAX_ATTEMPTS` (botocore attempts per request, default 3) and `ADS_S3_RETRIES` (s3fs rounds, default
2), so a dead endpoint fails within about 15 s.

A URI or endpoint with credentials in it (`s3://KEY:SECRET@bucket/...`, `http://user:pass@host:9000`) is refused
before any client is made (`refuse_credentials`), and every URI an error names has any such part removed.

`ads_core.storage` re-exports every public name here; this module never imports it (no cycle).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# ---------------------------------------------------------------------------------------------
# bounded S3 client settings (the endpoint they give is what the errors name)

_S3_LIMITS = {"ADS_S3_CONNECT_TIMEOUT": 2.0, "ADS_S3_READ_TIMEOUT": 15.0, "ADS_S3_MAX_ATTEMPTS": 3, "ADS_S3_RETRIES": 2}


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


_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@?#]*)@")


def redact(uri: str) -> str:
    """URI without a `user:password@` part (what may be shown in a message or a log)."""
    return _USERINFO.sub(r"\g<scheme>", uri)


def has_credentials(uri: str) -> bool:
    return _USERINFO.match(uri) is not None


def refuse_credentials(uri: str, what: str = "") -> None:
    """StorageError (never echoing them) when URI carries credentials in a `user:password@` part."""
    if has_credentials(uri):
        raise StorageError(
            redact(uri),
            f"{what or 'the URI'} has credentials in it (a user:password@ part), which would end up in logs and "
            "manifests; refused",
            "remove them and set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) instead",
        )


def _endpoint_env() -> tuple[str, str | None]:
    name = "ADS_S3_ENDPOINT_URL" if os.environ.get("ADS_S3_ENDPOINT_URL") else "AWS_ENDPOINT_URL"
    return name, os.environ.get(name) or None


def storage_options(uri: str) -> dict[str, Any]:
    """fsspec options for a URI; for s3 the endpoint comes from the environment."""
    if uri.startswith(("s3://", "s3a://")):
        opts: dict[str, Any] = {}
        name, endpoint = _endpoint_env()
        if endpoint:
            refuse_credentials(endpoint, name)  # botocore would fail with a long traceback that names them
            opts["endpoint_url"] = endpoint
        region = os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION")
        if region:
            opts["client_kwargs"] = {"region_name": region}
        opts["config_kwargs"] = {  # bounded: a dead endpoint must fail in seconds, not minutes
            "connect_timeout": _limit("ADS_S3_CONNECT_TIMEOUT"),
            "read_timeout": _limit("ADS_S3_READ_TIMEOUT"),
            "retries": {"max_attempts": _limit("ADS_S3_MAX_ATTEMPTS"), "mode": "standard"},
        }
        # fsspec's own instance cache ignores credentials taken from the environment; ours keys on them.
        opts["skip_instance_cache"] = True
        return opts
    return {}


# ---------------------------------------------------------------------------------------------
# errors a user must fix


class StorageError(Exception):
    """A storage problem no retry fixes; one line with the URI, the endpoint (never credentials) and the fix."""

    def __init__(self, uri: str, problem: str, fix: str, endpoint: str | None = None) -> None:
        uri, endpoint = redact(uri), None if endpoint is None else redact(endpoint)
        self.uri, self.problem, self.fix, self.endpoint = uri, problem, fix, endpoint
        where = f" (endpoint {endpoint})" if endpoint else ""
        super().__init__(" ".join(f"storage error at {uri}{where}: {problem}; {fix}".split()))

    def __reduce__(self) -> tuple[type[StorageError], tuple[str, str, str, str | None]]:
        """Pickles (Prefect and Dask ship exceptions between processes) with its parts."""
        return (type(self), (self.uri, self.problem, self.fix, self.endpoint))


_CREDENTIAL_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "InvalidClientTokenId",
    "TokenRefreshRequired",
    "AuthorizationHeaderMalformed",
}
_DENIED_CODES = {"AccessDenied", "AllAccessDisabled", "403", "Forbidden"}
_CONNECT_FAILURES = {
    "ClientConnectorError",
    "ClientConnectorDNSError",
    "ConnectTimeoutError",
    "NewConnectionError",
    "ConnectionTimeoutError",
}  # connect never succeeded; resets after connect stay transient
_LOCAL_ERRNOS = {
    errno.ENOSPC: ("no space left on the device", "free space there or write elsewhere (--out)"),
    errno.EDQUOT: ("disk quota exceeded", "free space there or write elsewhere (--out)"),
    errno.EROFS: ("the filesystem is read-only", "write to a writable location (--out)"),
}
WRITE_ERRNOS = frozenset({*_LOCAL_ERRNOS, errno.EACCES, errno.EPERM})  # a write that no retry will fix


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
        todo += [
            x
            for x in (e.__cause__, e.__context__, wrapped.get("error") if isinstance(wrapped, dict) else None)
            if isinstance(x, BaseException)
        ]


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def endpoint_of(uri: str) -> str:
    """The S3 endpoint a URI is served from, without any user:password part."""
    return redact(_endpoint_env()[1] or "the AWS default endpoint")


def _file_in_the_way(path: str) -> str | None:
    """The nearest existing ancestor of `path` (or itself) when it is a file rather than a folder."""
    for candidate in (Path(path), *Path(path).parents):
        if candidate.exists() or candidate.is_symlink():
            return None if candidate.is_dir() else str(candidate)
    return None


def as_storage_error(exc: BaseException, uri: str, reading: bool = False) -> StorageError | None:
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
            return StorageError(
                uri, f"bucket {bucket!r} does not exist", "create it or fix the bucket in --out", endpoint
            )
        if names & {"PartialCredentialsError", "NoCredentialsError"}:
            return StorageError(
                uri,
                "the credentials are missing or incomplete",
                "set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)",
                endpoint,
            )
        if codes & _CREDENTIAL_CODES:
            return StorageError(
                uri,
                f"the credentials were rejected ({', '.join(sorted(codes & _CREDENTIAL_CODES))})",
                "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN",
                endpoint,
            )
        if codes & _DENIED_CODES or any(isinstance(e, PermissionError) for e in chain):
            return StorageError(
                uri,
                f"permission denied ({', '.join(sorted(codes & _DENIED_CODES)) or 'denied'})",
                "use credentials allowed to read and write this bucket, or another --out",
                endpoint,
            )
        if names & _CONNECT_FAILURES or any(isinstance(e, (ConnectionRefusedError, socket.gaierror)) for e in chain):
            return StorageError(
                uri,
                "the endpoint is unreachable (connection failed after bounded retries)",
                "check ADS_S3_ENDPOINT_URL / AWS_ENDPOINT_URL and that the store is running",
                endpoint,
            )
        return None
    if "://" in uri and not uri.startswith("file://"):
        return None
    path = uri.removeprefix("file://")
    if isinstance(exc, (NotADirectoryError, FileExistsError)) and (blocker := _file_in_the_way(path)):
        return StorageError(uri, f"{blocker} is a file, not a folder", "choose another --out or move that file away")
    if isinstance(exc, IsADirectoryError):
        return StorageError(uri, f"{exc.filename or path} is a folder, not a file", "move that folder away")
    if isinstance(exc, PermissionError):
        return StorageError(
            uri,
            f"permission denied on {exc.filename or path}",
            "make it readable" if reading else "fix the folder's permissions or choose another --out",
        )
    if isinstance(exc, OSError) and exc.errno in _LOCAL_ERRNOS:
        problem, fix = _LOCAL_ERRNOS[exc.errno]
        return StorageError(uri, problem, fix)
    return None


@contextlib.contextmanager
def translating(uri: str, reading: bool = False) -> Iterator[None]:
    """Raise StorageError instead of the user-fixable errors met inside; everything else unchanged."""
    try:
        yield
    except Exception as exc:
        err = as_storage_error(exc, uri, reading)
        if err is None or err is exc:
            raise
        raise err from exc
