"""Prefect's temporary (ephemeral) server, started and stopped by the build runner, tied to this process's life.

Reaches into two private names of Prefect (`SubprocessASGIServer._run_uvicorn_command` and `._instances`),
listed in `ads_core/common/private_apis.py` and pinned by `tests/integrations/test_private_apis.py`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def start_temporary_server() -> str:
    """Start Prefect's temporary (ephemeral) server now, from this thread, and tie its life to this process.

    Prefect starts it on first use from whichever thread gets there first, and stops it only at a clean exit:
    after kill -9 it lived on (about 225 MB each). Started here, before the flow, it is the one Prefect then
    uses, and a watchdog (`ads_core.common.procs.reap_with_me`) stops it when this process ends in any way.

    The watchdog is attached to each server process as soon as it is spawned, not after `start()` returns:
    the server takes seconds to answer its health check, and a kill -9 in that window left it running.
    Returns its API URL."""
    from prefect.server.api.server import SubprocessASGIServer

    from ads_core.common.procs import reap_with_me

    server = SubprocessASGIServer()  # the instance Prefect's clients use in ephemeral mode (port None)
    spawn = getattr(server, "_run_uvicorn_command", None)  # Prefect 3.x; start() calls it for each attempt
    if spawn is not None and not server.running:

        def spawn_reaped() -> Any:
            with own_session():
                process = spawn()
            reap_with_me(process.pid)
            return process

        server._run_uvicorn_command = spawn_reaped  # type: ignore[method-assign]
    server.start()
    if spawn is None and server.server_process is not None:  # an unknown Prefect: attach once it answers
        reap_with_me(server.server_process.pid)
    return server.api_url


@contextmanager
def own_session() -> Iterator[None]:
    """Processes started in this block (from this thread) get a session of their own, so a Ctrl-C at the terminal,
    which signals the whole foreground process group, does not reach them: the temporary server died of it while
    the interrupted flow still had to report to it, and the command then hung retrying a server that was gone.
    We stop the server ourselves (`stop_temporary_server`, or the watchdog when this process dies)."""
    original = subprocess.Popen

    class SessionPopen(original):  # type: ignore[valid-type,misc]  # a Popen still, for isinstance checks
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("start_new_session", True)
            super().__init__(*args, **kwargs)

    subprocess.Popen = SessionPopen  # type: ignore[misc]
    try:
        yield
    finally:
        subprocess.Popen = original  # type: ignore[misc]


def stop_temporary_server() -> None:
    """Ship the run's pending logs and events, then stop the temporary server now, quietly.

    Prefect otherwise stops it at interpreter exit and logs "Stopping temporary server" after everything the
    command printed, so that INFO line, not the summary or the `error:` line, was the command's last line.
    """
    import logging

    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.server.api.server import SubprocessASGIServer, subprocess_server_logger

    for worker in (APILogWorker, EventsWorker):
        try:
            worker.drain_all(timeout=5)
        except Exception:  # noqa: BLE001 - the server may already be gone; nothing left to ship then
            pass
    server = SubprocessASGIServer._instances.get(None)  # the ephemeral instance (port None), if one started
    if server is None:
        return
    previous = subprocess_server_logger.level
    subprocess_server_logger.setLevel(logging.WARNING)
    try:
        server.stop()
    finally:
        subprocess_server_logger.setLevel(previous)
