"""What every stage task shares: the stage output record, the intact check, retry rules, progress hooks.

A stage task returns a small JSON record `{"uri": <main output>, "digest": <hash of every output>}`,
persisted as the Prefect cache record (JSON serializer: nothing is pickled). `intact()` re-checks
that record against the manifest and the files in storage, so a cached stage whose artifact vanished
or was replaced is recomputed rather than trusted (see `tasks.stage_task.run_checked`).

Transient errors (network, storage I/O) are retried with exponential backoff; bad input, missing
artifacts and invariant violations are not retried and fail fast with their own message.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from ads_core.pipeline.keys import outputs_digest, reusable
from ads_core.stages.base import ProgressFactory, Stage, StageContext, after_each_tick
from ads_core.storage import manifest as mf

log = logging.getLogger("ads.tasks")

StageOutput = dict[str, str]  # {"uri": main output URI, "digest": hash of all the stage's output hashes}

FAULT_ENV = "ADS_TEST_FAIL_STAGE"  # test-only: comma-separated stage names that raise InjectedFault
PAUSE_ENV = "ADS_TEST_PAUSE_STAGE"  # test-only: "stage[@progress]:marker-file[:seconds]": touch the file, then sleep
RETRIES_ENV = "ADS_TASK_RETRIES"
RETRY_DELAY_ENV = "ADS_RETRY_BASE_DELAY"


def stage_output(manifest: mf.Manifest, main: str) -> StageOutput:
    return {"uri": manifest.output_uri(main), "digest": outputs_digest(manifest)}


def intact(
    output: StageOutput,
    stage: Stage | None = None,
    ctx: StageContext | None = None,
    shard: int | None = None,
    key: str | None = None,
) -> bool:
    """True if the artifact a (cached) record points to is still there, unchanged, with a manifest that checks out.

    With the stage run it is for (STAGE, CTX, SHARD, KEY), the manifest must also record that stage key and say what
    this build's config gives the fields later work reads (`keys.reusable`): a record stored under the key of a
    source as it was before a run is not trusted for the different bytes that run read."""
    if stage is not None and ctx is not None and key is not None:
        current = reusable(stage, ctx, shard, key)
    else:
        current = mf.verify(mf.stage_dir_of(output["uri"]))
    return current is not None and outputs_digest(current) == output["digest"]


# ---------------------------------------------------------------------------------------------
# retries


class InjectedFault(RuntimeError):
    """Raised by the test-only fault hook (ADS_TEST_FAIL_STAGE); never retried."""


def fault_point(stage: str) -> None:
    """Test-only hook: fail this stage when its name is listed in ADS_TEST_FAIL_STAGE."""
    wanted = {s.strip() for s in os.environ.get(FAULT_ENV, "").split(",") if s.strip()}
    if stage in wanted:
        raise InjectedFault(f"injected failure in stage {stage!r} ({FAULT_ENV})")


def pause_point(stage: str) -> None:
    """Test-only hook: with ADS_TEST_PAUSE_STAGE=stage:FILE[:SECONDS], create FILE and sleep (600 s), so a test can
    kill -9 or SIGSTOP the build here."""
    wanted, _, marker = os.environ.get(PAUSE_ENV, "").partition(":")
    if wanted == stage and marker:
        import time

        seconds = 600.0
        path, _, tail = marker.rpartition(":")
        if path and tail.replace(".", "", 1).isdigit():
            marker, seconds = path, float(tail)
        staged = Path(f"{marker}.{os.getpid()}.tmp")  # the file appears with the pid in it: a test that sees it
        staged.write_text(str(os.getpid()))  # may kill us at once, and read the pid afterwards
        os.replace(staged, marker)
        time.sleep(seconds)


def pausing_at_progress(factory: ProgressFactory, stage: str) -> ProgressFactory:
    """Test-only hook: with ADS_TEST_PAUSE_STAGE=<stage>@progress:FILE[:SECONDS], pause (`pause_point`) at the stage's
    first progress tick: rows computed, nothing stored or published yet (a kill there is a kill mid-work)."""
    point = f"{stage}@progress"
    if os.environ.get(PAUSE_ENV, "").partition(":")[0] != point:
        return factory

    return after_each_tick(factory, lambda: lambda: pause_point(point))


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
    from ads_core.models import ModelLoadError
    from ads_core.storage.errors import StorageError
    from ads_core.storage.fencing import LockLost
    from ads_prefect.tasks.locks import LockWaitTimeout
    from ads_prefect.tasks.lockstore import LockSettingsError

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


# ---------------------------------------------------------------------------------------------
# in-process progress (the `ads build` CLI shows rich bars; deployment runs have none)

_progress_factory: ProgressFactory | None = None


def set_progress_factory(factory: ProgressFactory | None) -> None:
    global _progress_factory
    _progress_factory = factory


@contextmanager
def progress(description: str, total: int | None, unit: str = "rows") -> Iterator[Callable[[int], None] | None]:
    with _progress_factory(description, total, unit) if _progress_factory else nullcontext() as advance:
        yield advance


def artifact_key(dataset: str, what: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in f"ads-{dataset}-{what}".lower())
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug.strip("-")
