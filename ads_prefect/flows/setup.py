"""What a process that runs our flows needs set up, applied by each flow when it starts, never at import.

Importing `ads_prefect` (or any of its modules) changes nothing in the process: no Prefect name is patched, no log
filter installed, no lock folder moved. Each flow calls `prepare_process()` first (`ads build` and `ads demo` run
their flow, so they get it too; a deployment's worker runs the flow); a Dask worker gets the routing from its
plugin (`ads_prefect.runtime.dask_worker`) and the stage filter from the stage run itself. Every step is
idempotent, so nested flows (the demo runs the build) apply nothing twice.
"""

from __future__ import annotations


def prepare_process() -> None:
    """Route Prefect's services by API URL (`runtime.api_routing`) and install the one-line log filters for failed
    stage and training runs."""
    from ads_prefect.runtime.api_routing import route_services_by_api_url
    from ads_prefect.tasks import stage_task, train

    route_services_by_api_url()
    stage_task.install_log_filters()
    train.install_log_filters()
