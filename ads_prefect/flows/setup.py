"""What a process that runs our flows needs set up, applied by each flow when it starts, never at import.

Importing `ads_prefect` (or any of its modules) changes nothing in the process: no Prefect name is patched, no log
filter installed, no lock folder moved. Each flow calls `prepare_process()` first (`ads build` and `ads demo` run
their flow, so they get it too; a deployment's worker runs the flow); a Dask worker gets the routing from its
plugin (`ads_prefect.runtime.dask_worker`) and the stage filter from the stage run itself. Every step is
idempotent, so nested flows (the demo runs the build) apply nothing twice. What must be set before a flow's run
exists, the temporary server's settings, is applied by the flow's call itself: our flows are `AdsFlow`s (`flow`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prefect import Flow


class AdsFlow(Flow):  # type: ignore[type-arg]
    """A Prefect flow that, called in this process, applies what Prefect's temporary server needs before Prefect
    starts it (`runtime.prefect_env.quiet_temporary_server`): a flow's own code runs only after the engine has
    created its run, and with it the server."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from ads_prefect.runtime.prefect_env import quiet_temporary_server

        with quiet_temporary_server():
            return super().__call__(*args, **kwargs)


def flow(**options: Any) -> Callable[[Callable[..., Any]], AdsFlow]:
    """`prefect.flow(**options)` for our flows: the same flow, as an `AdsFlow`."""
    return lambda fn: AdsFlow(fn=fn, **options)


def prepare_process() -> None:
    """Route Prefect's services by API URL (`runtime.api_routing`) and install the one-line log filters for failed
    stage and training runs."""
    from ads_prefect.runtime.api_routing import route_services_by_api_url
    from ads_prefect.tasks import stage_task, train

    route_services_by_api_url()
    stage_task.install_log_filters()
    train.install_log_filters()
