"""The build runner: runs the `ads-build` flow in this process, as `ads build` does, and owns everything around it
(`flow_session`, which `ads demo` runs its flow in too).

Before Prefect starts (seconds of start-up) it refuses what would fail later in one line: credentials in SOURCE or
OUT, a missing SOURCE file, bad lock settings, an OUT it cannot write, a Dask scheduler nobody answers at. Then it
prepares Prefect's environment (`prefect_env`), starts the temporary server when no server is configured (in a
session of its own, so a Ctrl-C at the terminal does not reach it; stopped with this process, kill -9 included:
`server`), and runs the flow. On Ctrl-C / SIGTERM it unwinds the flow, releases the locks, marks the run Crashed
(`runs.mark_crashed`) and exits with status 130, within GRACE_S even when work in a thread or a worker process
keeps the flow from unwinding; bad input or a lost lock ends the run with one line (`BuildFailed`, status 2).

The flow is passed in (`load_flow`, called once the environment is set, since Prefect reads it when first
imported): this module sits below the flows and never imports them.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ads_core.common.errors import InputError
from ads_core.common.progress import working_on
from ads_core.config.build import BuildConfig
from ads_core.storage.errors import StorageError
from ads_core.storage.fencing import LockLost

GRACE_S = 5.0  # after SIGTERM / Ctrl-C, how long the flow may take to unwind before we exit regardless
EXIT_FAILED = 2  # bad input or setup: one `error:` line
EXIT_INTERRUPTED = 130  # Ctrl-C / SIGTERM, as a shell reports SIGINT

Say = Callable[[str], None]


class BuildFailed(Exception):
    """The build stopped on bad input or setup, or lost its lock; `cause` is the error to show, in one line."""

    exit_code = EXIT_FAILED

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


@dataclass(frozen=True)
class BuildRun:
    result: dict[str, Any]  # what the flow returned
    run_url: str | None  # the run's page, when a server keeps it (not in ephemeral mode)


def say_stderr(text: str) -> None:
    sys.stderr.write(text + "\n")


def check_before_start(source: str | None, out: str | None, cfg: BuildConfig) -> None:
    """Raise BuildFailed for what would otherwise fail only after Prefect's start-up."""
    from ads_core import storage
    from ads_core.locks.store import LockSettingsError, lock_settings
    from ads_core.storage.errors import refuse_credentials
    from ads_prefect.runtime.dask import check_scheduler

    try:
        for what, uri in (("SOURCE", source), ("OUT", out)):
            refuse_credentials(uri or "", what)  # before the flow run records them as parameters
        if source and _looks_like_path(source) and not _exists(source):
            raise InputError(f"{source}: no such file or directory")
        lock_settings()  # ADS_LOCK_LEASE_S=0 or =abc: one line now, not after the start-up
        if out:
            storage.check_writable(out)
        check_scheduler(cfg.run.dask)  # nobody answering: one line now, not a 30 s hang after the start-up
    except (InputError, StorageError, LockSettingsError) as exc:
        raise BuildFailed(exc) from None


def _looks_like_path(source: str) -> bool:
    """A URI, an absolute/relative path or a data file name; `owner/name` alone may be a hub id."""
    from ads_core.ingest.readers import looks_like_hub_id
    from ads_core.ingest.records import SUPPORTED_SUFFIXES

    return not looks_like_hub_id(source) or source.lower().endswith(SUPPORTED_SUFFIXES)


def _exists(uri: str) -> bool:
    from ads_core import storage

    try:
        return storage.exists(uri)
    except Exception:  # noqa: BLE001 - unreachable storage is reported by the flow with its own message
        return True


@contextmanager
def quiet_terminal() -> Iterator[None]:
    """Prefect's INFO logs still reach its API/UI; the terminal shows warnings (all of it with -v), and a failed
    run's error is printed once, as the `error:` line."""

    def hide_run_errors(record: logging.LogRecord) -> bool:
        return not (
            record.name.startswith(("prefect.flow_runs", "prefect.task_runs")) and record.levelno >= logging.ERROR
        )

    quiet = [] if logging.getLogger().level <= logging.DEBUG else list(logging.getLogger().handlers)
    levels = [h.level for h in quiet]
    for handler in quiet:
        handler.setLevel(max(handler.level, logging.WARNING))
        handler.addFilter(hide_run_errors)
    try:
        yield
    finally:
        for handler, level in zip(quiet, levels, strict=True):
            handler.setLevel(level)
            handler.removeFilter(hide_run_errors)


def run_build(
    load_flow: Callable[[], Callable[..., dict[str, Any]]],
    source: str | None,
    out: str | None,
    dataset: str | None,
    cfg: BuildConfig,
    cache_dir: Path,
    progress: Any = None,
    say: Say = say_stderr,
) -> BuildRun:
    """Run the build flow (`load_flow()`) on SOURCE into OUT with CFG, as `ads build` does (see the module).

    Returns the flow's result and the run's page; raises BuildFailed (one line, exit status 2); on Ctrl-C /
    SIGTERM the process exits with status 130 after releasing its locks."""
    check_before_start(source, out, cfg)
    with flow_session(cache_dir, progress, say, "the build", "skip this and watch in the UI") as api_url:
        from prefect.exceptions import ParameterTypeError

        from ads_core.locks.manager import LockWaitTimeout
        from ads_core.models import ModelLoadError
        from ads_prefect.runtime.runs import run_url

        flow = load_flow()
        try:
            sections = {name: getattr(cfg, name) for name in BuildConfig.model_fields}
            result = flow(source=source or None, dataset=dataset, out=out, **sections)
            page = run_url(result["flow_run"]["id"]) if api_url else None  # while the server's settings apply
        except (
            InputError,
            ModelLoadError,
            ValueError,
            ParameterTypeError,
            StorageError,
            LockWaitTimeout,
            LockLost,
        ) as exc:  # one `error:` line; LockLost: another build took OUT over and this one published nothing more
            raise BuildFailed(exc) from None
    return BuildRun(result, page)


@contextmanager
def flow_session(cache_dir: Path, progress: Any, say: Say, what: str, hint: str) -> Iterator[str | None]:
    """Around a flow run in this process (`ads build`, `ads demo`): Prefect's environment, the temporary server
    when none is configured (yields its API URL, None in ephemeral mode), the progress bars, and SIGINT / SIGTERM
    handled alike: unwind, then exit with status 130 (`stop_now`), at the latest GRACE_S after the signal. WHAT
    names the work in the interrupt line, HINT ends the ephemeral-mode note."""
    from ads_prefect.runtime.prefect_env import local_prefect_env

    with quiet_terminal(), local_prefect_env(cache_dir) as api_url:
        if api_url is None:
            say(
                "no Prefect server configured: starting a temporary local one (ephemeral mode, ~10-20 s); "
                f"run `ads server` and set PREFECT_API_URL to {hint}"
            )
        from prefect.exceptions import TerminationSignal

        from ads_prefect.runtime.progress import set_progress_factory
        from ads_prefect.runtime.server import start_temporary_server, stop_temporary_server

        set_progress_factory(progress)
        interrupt = _interrupt(say, what)  # Ctrl-C and SIGTERM alike: unwind, and exit after GRACE_S regardless
        previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            if api_url is None:
                with working_on(f"starting a temporary Prefect server for {what}"):  # what the heartbeat names
                    start_temporary_server()  # stopped with this process, kill -9 included
            yield api_url
        except (KeyboardInterrupt, TerminationSignal):  # Ctrl-C, or SIGTERM (Prefect's handler while the flow runs)
            stop_now(say, what=what)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            set_progress_factory(None)
            if api_url is None:
                stop_temporary_server()  # its goodbye line would otherwise follow the summary or the error


_interrupting = threading.Event()  # a SIGINT / SIGTERM reached this process's handler: it is unwinding


def interrupting() -> bool:
    """Whether this process is already stopping on SIGINT / SIGTERM (a second signal would only cut its cleanup)."""
    return _interrupting.is_set()


def interrupt_this_process() -> None:
    """Stop this process as Ctrl-C would (its handler unwinds the flow, releases the locks and exits with 130), once:
    for work in a worker process that was interrupted alone."""
    if not interrupting():
        os.kill(os.getpid(), signal.SIGINT)


def _interrupt(say: Say, what: str) -> Callable[[int, object], None]:
    """A SIGINT / SIGTERM handler that unwinds like Ctrl-C; if a stage computing in a worker thread (or a task
    waiting on a training worker) keeps the flow from unwinding, a timer marks the run Crashed, releases our
    locks and exits after GRACE_S."""

    def handler(signum: int, frame: object) -> None:
        _interrupting.set()
        try:
            from prefect.context import FlowRunContext

            run = FlowRunContext.get()
            run_id = str(run.flow_run.id) if run and run.flow_run else None
        except Exception:  # noqa: BLE001 - no flow running yet
            run_id = None
        timer = threading.Timer(GRACE_S, stop_now, args=(say,), kwargs={"crashed_run": run_id, "what": what})
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt

    return handler


def stop_now(say: Say = say_stderr, crashed_run: str | None = None, what: str = "the build") -> None:
    """After Ctrl-C / SIGTERM: release our locks, ship pending run logs, and exit at once with 130.

    The flow run is already marked Crashed by Prefect when it unwound; when it did not (CRASHED_RUN), it is marked
    here. A stage still computing in a worker thread (a score shard) would otherwise keep the process alive until
    it finished.
    """
    from ads_core.locks.manager import release_everything
    from ads_prefect.runtime.runs import mark_crashed

    release_everything()
    if crashed_run:
        try:
            mark_crashed(crashed_run, "stopped by SIGTERM / Ctrl-C")
        except Exception:  # noqa: BLE001 - the server may be gone too; the next build marks it instead
            pass
    say(f"interrupted: {what} stopped and released its locks; rerun the same command to resume from what finished")
    try:
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=3)
    except Exception:  # noqa: BLE001 - best effort: the run's state is already recorded
        pass
    sys.stderr.flush()
    unlink_semaphores()
    os._exit(EXIT_INTERRUPTED)


def unlink_semaphores() -> None:
    """Unlink the named semaphores of this process's worker pools (the demo's training workers), as a normal exit's
    finalizers would: `os._exit` skips them, and the resource tracker then warned "There appear to be 5 leaked
    semaphore objects to clean up at shutdown" after every Ctrl-C."""
    from multiprocessing import synchronize, util

    registry = getattr(util, "_finalizer_registry", {})  # CPython's finalizers: SemLock registers its unlink there
    for finalizer in list(registry.values()):
        if getattr(finalizer, "_callback", None) is synchronize.SemLock._cleanup:
            try:
                finalizer()
            except OSError:  # already gone: nothing to unlink
                pass
