"""What runs inside Dask workers: the plugin each build registers, and an optional preload.

`RouteServicesByApiUrl` (registered by `cluster.prepare_workers` at the start of every Dask build) makes the
worker's Prefect services follow each task's own API (`ads_prefect.runtime.api_routing`).

The preload, `dask worker tcp://SCHEDULER:8786 --preload ads_prefect.runtime.dask_worker`, is optional: without it
a worker imports the same modules when its first stage task arrives. With it the worker pays for the heavy imports
(Prefect's task engine, torch, transformers: tens of seconds on a busy node) when it starts, not inside the first
build's score stage.
"""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin


class RouteServicesByApiUrl(WorkerPlugin):
    """Worker plugin: each task run talks to its own build's Prefect API (`runtime.api_routing`).

    The scheduler keeps registered plugins and gives them to workers that join later (one that replaces a
    dead worker), so registering it at the start of each build covers the whole cluster."""

    name = "ads-route-prefect-services-by-api-url"
    idempotent = True

    def setup(self, worker: Any) -> None:
        from ads_prefect.runtime.api_routing import route_services_by_api_url

        route_services_by_api_url()


def dask_setup(worker: Any) -> None:
    """Dask calls this once, when the worker starts."""
    import torch  # noqa: F401 - imported for its start-up cost
    import transformers

    transformers.AutoModelForCausalLM  # noqa: B018 - transformers imports its models lazily: load them now

    import prefect.task_engine  # noqa: F401 - what runs each stage task

    from ads_core.pipeline import stages  # noqa: F401 - the declared stages and their modules
    from ads_prefect.runtime.api_routing import route_services_by_api_url

    route_services_by_api_url()
