"""What every stage task shares: the content-keyed cache policy, retry rules, build locks and hooks.

Cache key = `TASK_SOURCE + CachePolicy.from_cache_key_fn(content_key)`:
- the task wrapper's own source (TASK_SOURCE), and
- `content_key`: the *content* of every input artifact (its sha256, read from the manifest written
  beside it, or hashed when there is none), the source dataset's tree hash, the stage config, the
  output root (so a build into another OUT really writes there), and the code version of the
  `ads_core` modules the task wraps. Path strings alone never decide a cache hit.

A stage task returns a small JSON record `{"uri": <main output>, "digest": <hash of every output>}`,
persisted as the cache record (JSON serializer: nothing is pickled). `intact()` re-checks that record
against the manifest and the files in storage, so a cached stage whose artifact vanished or was
replaced by another build is recomputed rather than trusted (see `flows.ads_build.run_stage`).

Transient errors (network, storage I/O) are retried with exponential backoff; bad input, missing
artifacts and invariant violations are not retried and fail fast with their own message.

Two builds of the same dataset into the same output serialise on the cache key
(`isolation_level="SERIALIZABLE"` + a file lock manager): the second waits for the first and then
reads its record as `Cached`, so the work is done once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from prefect import task
from prefect.cache_policies import NO_CACHE, TASK_SOURCE, CachePolicy
from prefect.context import TaskRunContext
from prefect.locking.filesystem import FileSystemLockManager

from ads_core import manifest as mf
from ads_core import readers, storage

log = logging.getLogger("ads.tasks")

F = TypeVar("F", bound=Callable[..., Any])
StageOutput = dict[str, str]  # {"uri": main output URI, "digest": hash of all the stage's output hashes}

FAULT_ENV = "ADS_TEST_FAIL_STAGE"  # test-only: comma-separated stage names that raise InjectedFault
RETRIES_ENV = "ADS_TASK_RETRIES"
RETRY_DELAY_ENV = "ADS_RETRY_BASE_DELAY"
LOCK_DIR_ENV = "ADS_LOCK_DIR"


# ---------------------------------------------------------------------------------------------
# content key


_CODE_VERSIONS: dict[str, str] = {}
_KEY_EXTRAS: dict[str, Callable[[dict[str, Any]], Any]] = {}


def outputs_digest(manifest: mf.Manifest) -> str:
    """One hash over every output hash a manifest lists (a stage's identity in storage)."""
    hashes = {name: entry["sha256"] for name, entry in sorted(manifest.outputs.items())}
    return "sha256:" + hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()


stage_dir_of = mf.stage_dir_of


def stage_output(manifest: mf.Manifest, main: str) -> StageOutput:
    return {"uri": manifest.output_uri(main), "digest": outputs_digest(manifest)}


def intact(output: StageOutput) -> bool:
    """True if the artifact a (cached) record points to is still there, unchanged, with its manifest."""
    current = mf.verify(stage_dir_of(output["uri"]))
    return current is not None and outputs_digest(current) == output["digest"]


artifact_digest = mf.artifact_hash  # sha256 from the manifest beside the artifact, else hashed


def source_digest(source: str) -> str:
    """Tree hash of a local/remote dataset file or directory; a hub id is keyed by its name."""
    if storage.exists(source):
        return storage.tree_hash(source, readers.SUPPORTED_SUFFIXES)
    return f"id:{source}"


def content_key(ctx: TaskRunContext, params: dict[str, Any]) -> str:
    """Cache key from input *content*, config, output root and ads_core code version (see module doc).

    Parameter conventions: `source` is a dataset (its path and tree hash); `*_uri` / `*_uris` are artifacts
    (content digests); everything else (config dicts, `out`, indices) is keyed by value.
    """
    name = ctx.task.name
    payload: dict[str, Any] = {"task": name, "ads_code": _CODE_VERSIONS.get(name)}
    for key, value in sorted(params.items()):
        if key == "source":  # the path too: rows record it (extra_info.source_file)
            payload[key] = [value, source_digest(value)]
        elif key.endswith("_uri"):
            payload[key] = artifact_digest(value)
        elif key.endswith("_uris"):
            payload[key] = [artifact_digest(v) for v in value]
        else:
            payload[key] = value
    if name in _KEY_EXTRAS:
        payload["extra"] = _KEY_EXTRAS[name](params)
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return f"{name}-{hashlib.sha256(blob).hexdigest()[:40]}"


# ---------------------------------------------------------------------------------------------
# locks


def lock_dir() -> Path:
    """Where build locks live: ADS_LOCK_DIR (a shared filesystem for multi-node builds) or $PREFECT_HOME/ads-locks."""
    explicit = os.environ.get(LOCK_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser().resolve()
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home).expanduser().resolve() / "ads-locks"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class BuildLockManager(FileSystemLockManager):
    """Prefect's file lock manager, with the directory resolved when used and stale locks broken.

    Prefect's holder string is `host:pid:thread...`; a lock whose holder process on this host is gone
    (killed build, OOM) would otherwise block every later build forever, so it is removed.
    """

    def __init__(self) -> None:
        super().__init__(Path("."))

    @property  # type: ignore[override]
    def lock_files_directory(self) -> Path:
        return lock_dir()

    @lock_files_directory.setter
    def lock_files_directory(self, value: Path) -> None:  # set by the base __init__; resolved lazily instead
        pass

    def is_locked(self, key: str, use_cache: bool = False) -> bool:
        info = self._get_lock_info(key, use_cache=use_cache)
        if info is not None and _stale(info.get("holder", "")):
            log.warning("removing a stale build lock %s held by a dead process (%s)", key, info.get("holder"))
            Path(info["path"]).unlink(missing_ok=True)
            self._locks.pop(key, None)
            return False
        return super().is_locked(key, use_cache=use_cache)


def _stale(holder: str) -> bool:
    parts = holder.split(":")
    if len(parts) < 2 or parts[0] != socket.gethostname():
        return False
    try:
        return not _pid_alive(int(parts[1]))
    except ValueError:
        return False


STAGE_CACHE = (TASK_SOURCE + CachePolicy.from_cache_key_fn(content_key)).configure(
    isolation_level="SERIALIZABLE", lock_manager=BuildLockManager())


# ---------------------------------------------------------------------------------------------
# retries


class InjectedFault(RuntimeError):
    """Raised by the test-only fault hook (ADS_TEST_FAIL_STAGE); never retried."""


def fault_point(stage: str) -> None:
    """Test-only hook: fail this stage when its name is listed in ADS_TEST_FAIL_STAGE."""
    wanted = {s.strip() for s in os.environ.get(FAULT_ENV, "").split(",") if s.strip()}
    if stage in wanted:
        raise InjectedFault(f"injected failure in stage {stage!r} ({FAULT_ENV})")


_TRANSIENT_S3_CODES = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "RequestTimeTooSkewed",
                       "InternalError", "ServiceUnavailable", "503", "500", "502", "504"}


def is_transient(exc: BaseException | None) -> bool:
    """Network and storage hiccups are worth a retry; bad input and broken invariants are not."""
    if exc is None:
        return False
    from ads_core.models import ModelLoadError
    from ads_core.readers import InputError

    if isinstance(exc, (InputError, ModelLoadError, InjectedFault, FileNotFoundError, PermissionError,
                        IsADirectoryError, NotADirectoryError, ValueError, TypeError, KeyError)):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    module = type(exc).__module__ or ""
    if module.startswith(("botocore", "aiobotocore")):
        code = str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))
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


# ---------------------------------------------------------------------------------------------
# task factories


def stage_task(name: str, *, wraps: tuple[ModuleType, ...],
               key_extra: Callable[[dict[str, Any]], Any] | None = None, **options: Any) -> Callable[[F], F]:
    """Decorator for a cached, retried stage task wrapping the `ads_core` modules `wraps`."""
    _CODE_VERSIONS[name] = mf.code_version(*wraps)
    if key_extra is not None:
        _KEY_EXTRAS[name] = key_extra
    return task(  # type: ignore[return-value]
        name=name, cache_policy=STAGE_CACHE, persist_result=True, result_serializer="json",
        retries=default_retries(), retry_delay_seconds=retry_delays(), retry_jitter_factor=0.2,
        retry_condition_fn=retry_if_transient, tags=["ads-build"], **options)


def report_task(name: str, **options: Any) -> Callable[[F], F]:
    """Decorator for an uncached task that only publishes UI artifacts (cheap; runs on every build)."""
    return task(  # type: ignore[return-value]
        name=name, cache_policy=NO_CACHE, persist_result=False, retries=2, retry_delay_seconds=[1, 2],
        retry_condition_fn=retry_if_transient, tags=["ads-build"], **options)


# ---------------------------------------------------------------------------------------------
# in-process progress (the `ads build` CLI shows rich bars; deployment runs have none)

ProgressFactory = Callable[[str, int | None], AbstractContextManager[Callable[[int], None] | None]]
_progress_factory: ProgressFactory | None = None


def set_progress_factory(factory: ProgressFactory | None) -> None:
    global _progress_factory
    _progress_factory = factory


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[[int], None] | None]:
    with (_progress_factory(description, total) if _progress_factory else nullcontext()) as advance:
        yield advance


def artifact_key(dataset: str, what: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in f"ads-{dataset}-{what}".lower())
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug.strip("-")
