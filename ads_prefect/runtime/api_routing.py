"""Each task run talks to the Prefect API of its own build, also in long-lived processes (Dask workers).

Prefect runs a few process-wide services, one instance per set of arguments: the `EventsWorker` that reports
task runs (Pending, Running, Completed... are events in Prefect 3), the services that take tag concurrency
slots, the log shipper. Each opens its API client once, when its instance starts, from the settings in effect
then; the events worker and the concurrency services are not keyed on the API URL. A Dask worker that ran a
task of build A therefore kept talking to A's API for every later build: a second build from another folder
(another temporary server, or another server) found its shard task runs stuck Pending ("Unable to acquire
concurrency slots", "Unable to connect to ws://...<A's port>") and failed.

Every task brings its build's settings to the worker (Prefect serialises them with the task).
`route_services_by_api_url` keys every such service instance on the API URL in effect where it is looked up, so
a task's events, slots and logs go to its own build's API whatever the process ran before; the instance starts
in the caller's context, so its client is opened with that URL. It is installed explicitly, never at import: by each
flow when it starts (`ads_prefect.flows.setup.prepare_process`) and on every Dask worker by a worker plugin
(`ads_prefect.runtime.dask_worker.RouteServicesByApiUrl`) before it runs any task.

It patches private names of Prefect (`_QueueServiceBase` and its instance cache), listed in
`ads_core/common/private_apis.py` and pinned by `tests/integrations/test_private_apis.py`.
"""

from __future__ import annotations

from typing import Any

_MARK = "_ads_keyed_by_api_url"
_TAG = "ads:api-url"


def route_services_by_api_url() -> None:
    """Key every Prefect queue service instance on the current API URL as well as its own arguments (idempotent)."""
    from prefect._internal.concurrency.services import _QueueServiceBase
    from prefect.settings import PREFECT_API_URL

    if getattr(_QueueServiceBase.instance, _MARK, False):
        return

    def instance(cls: Any, *args: Any) -> Any:
        key = hash((cls, *args, _TAG, PREFECT_API_URL.value()))
        with cls._instance_lock:
            with cls._instance_cache_lock:
                found = cls._instances.get(key)
                previous = cls._instances.get(hash((cls, *args)))  # Prefect's own key, which _new_instance uses
            if found is not None and not found._stopped:
                return found
            created = cls._new_instance(*args)  # cached under Prefect's key and started, in this context
            with cls._instance_cache_lock:
                if cls._instances.get(created._key) is created:  # give Prefect's key back, move ours to ours
                    if previous is None:
                        del cls._instances[created._key]
                    else:
                        cls._instances[created._key] = previous
                created._key = key
                cls._instances[key] = created
            return created

    setattr(instance, _MARK, True)
    _QueueServiceBase.instance = classmethod(instance)  # type: ignore[method-assign, assignment]
