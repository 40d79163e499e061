"""Flow runs on the Prefect API: marking one Crashed (the one place that does), and its page in the UI."""

from __future__ import annotations

import logging

log = logging.getLogger("ads.runtime")


def mark_crashed(run_id: str, message: str) -> str | None:
    """Mark flow run RUN_ID Crashed with MESSAGE unless it already ended; returns its name when it was marked.

    A build killed (SIGTERM past its grace, kill -9, or paused past its lease) leaves its flow run Running: the
    build runner marks its own run when it stops one, and the next build into the same OUT marks the run it took
    the lock over from. Raises what the API raises (the server may be gone): the caller says what that means."""
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)
        if run.state and run.state.is_final():
            return None
        client.set_flow_run_state(run_id, Crashed(message=message), force=True)
        return str(run.name)


def run_url(flow_run_id: str | None) -> str | None:
    """A flow run's page in the Prefect UI (PREFECT_UI_URL, else derived from PREFECT_API_URL); None without one."""
    if not flow_run_id:
        return None
    from prefect.utilities.urls import url_for

    try:
        return url_for("flow-run", obj_id=flow_run_id)
    except Exception:  # noqa: BLE001 - a link we cannot make is not worth failing a build
        return None
