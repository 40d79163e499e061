"""Preload for Dask workers that run ADS builds:

    dask worker tcp://SCHEDULER:8786 --preload ads_prefect.flows.dask_worker

Optional: without it a worker imports the same modules when its first stage task arrives, and a build
registers the routing plugin itself (`cluster.prepare_workers`). With it the worker pays for the heavy imports
(Prefect's task engine, torch, transformers: tens of seconds on a busy node) when it starts, not inside the
first build's score stage, and its Prefect services follow each task's API from its first task on.
"""

from __future__ import annotations

from typing import Any


def dask_setup(worker: Any) -> None:
    """Dask calls this once, when the worker starts."""
    import torch  # noqa: F401 - imported for its start-up cost
    import transformers

    transformers.AutoModelForCausalLM  # noqa: B018 - transformers imports its models lazily: load them now

    from ads_prefect.tasks import stage_task  # noqa: F401 - the stage task module; routes Prefect's services
    from ads_prefect.tasks.api_routing import route_services_by_api_url

    route_services_by_api_url()
