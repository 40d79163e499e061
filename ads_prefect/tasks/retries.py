"""Which errors a stage task retries, how often and how long it waits: transient errors (network, storage I/O) are
retried with exponential backoff; bad input, missing artifacts and invariant violations fail fast with their own
message (`expected_errors`: one line, no traceback).
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from ads_prefect.tasks.faults import InjectedFault

log = logging.getLogger("ads.tasks")

RETRIES_ENV = "ADS_TASK_RETRIES"
RETRY_DELAY_ENV = "ADS_RETRY_BASE_DELAY"

_USER_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


_TRANSIENT_S3_CODES = {
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "RequestTimeout",
    "RequestTimeTooSkewed",
    "InternalError",
    "ServiceUnavailable",
    "503",
    "500",
    "502",
    "504",
}


def expected_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean "fix your input or setup": one line in the run log, no traceback, never retried."""
    from ads_core.common.errors import OptionError
    from ads_core.locks.manager import LockWaitTimeout
    from ads_core.locks.store import LockSettingsError
    from ads_core.models import ModelLoadError
    from ads_core.storage.errors import StorageError
    from ads_core.storage.fencing import LockLost

    return (OptionError, ModelLoadError, LockWaitTimeout, StorageError, LockLost, LockSettingsError)


def is_transient(exc: BaseException | None) -> bool:
    """Network and storage hiccups are worth a retry; bad input and broken invariants are not."""
    if exc is None:
        return False
    from ads_core.common.errors import InputError
    from ads_core.models import ModelLoadError
    from ads_core.storage.errors import StorageError
    from ads_core.storage.fencing import LockLost

    if isinstance(
        exc,
        (
            InputError,
            ModelLoadError,
            StorageError,
            LockLost,
            InjectedFault,
            FileNotFoundError,
            PermissionError,
            IsADirectoryError,
            NotADirectoryError,
            ValueError,
            TypeError,
            KeyError,
        ),
    ):
        return False
    if isinstance(exc, OSError) and exc.errno in _USER_ERRNOS:  # a full disk or read-only mount: no retry helps
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    module = type(exc).__module__ or ""
    if module.startswith(("botocore", "aiobotocore")):
        response = getattr(exc, "response", None) or {}  # connection errors carry response=None
        code = str(response.get("Error", {}).get("Code", ""))
        return not code or code in _TRANSIENT_S3_CODES  # connection/read errors carry no code
    if module.startswith(("aiohttp", "urllib3", "httpx", "requests")):
        return True
    return isinstance(exc, OSError)  # storage I/O (s3fs maps service errors to OSError subclasses)


def retry_if_transient(task_obj: Any, task_run: Any, state: Any) -> bool:
    """Prefect `retry_condition_fn`: retry only transient errors; say why when not retrying."""
    exc = state.data if isinstance(state.data, BaseException) else None
    if exc is None:
        try:
            result = state.result(raise_on_failure=False)
            exc = result if isinstance(result, BaseException) else None
        except Exception:  # noqa: BLE001 - an unreadable state is not worth a retry
            exc = None
    if is_transient(exc):
        return True
    log.info("%s: not retrying %s: %s", getattr(task_obj, "name", "task"), type(exc).__name__, exc)
    return False


def retry_delays(retries: int | None = None) -> list[float]:
    """Exponential backoff: base, 2*base, 4*base... (ADS_RETRY_BASE_DELAY, default 2 s)."""
    n = default_retries() if retries is None else retries
    base = float(os.environ.get(RETRY_DELAY_ENV, "2"))
    return [base * 2**i for i in range(n)]


def default_retries() -> int:
    return int(os.environ.get(RETRIES_ENV, "3"))


def report_task(name: str, **options: Any) -> Callable[[Any], Any]:
    """Decorator for an uncached task that only publishes UI artifacts (cheap; runs on every build)."""
    return task(
        name=name,
        cache_policy=NO_CACHE,
        persist_result=False,
        retries=2,
        retry_delay_seconds=[1, 2],
        retry_condition_fn=retry_if_transient,
        **options,
    )
