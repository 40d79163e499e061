"""The shard map on Dask: which cluster (`run.dask`), what its workers need before they run a build's tasks,
and the checks that turn a misconfigured cluster into one line naming `run.dask` instead of a hung build.

A long-lived cluster serves many builds, each with its own Prefect API (a temporary server per `ads build`,
or a fixed server). Every task carries its build's settings to the worker; the worker plugin registered here
makes the worker's Prefect services (events, concurrency slots, logs) follow them (`runtime.api_routing`), so each
build's task runs report to that build's API whatever the worker ran before.
"""

from __future__ import annotations

import ipaddress
import socket
from contextlib import nullcontext
from typing import Any
from urllib.parse import urlsplit

from ads_core.common.errors import InputError
from ads_core.stages.base import Stage

SCHEDULER_CONNECT_S = 5.0
LOCAL_KINDS = ("local", "local-cuda")


def scheduler_address(dask: str) -> str:
    """`run.dask` as a scheduler address: `host:port` gets Dask's default protocol, tcp://."""
    return dask if "://" in dask else f"tcp://{dask}"


def check_scheduler(dask: str | None, timeout: float = SCHEDULER_CONNECT_S) -> None:
    """Raise InputError (one line, naming run.dask) when `run.dask` is a scheduler address nobody answers at.

    A plain TCP connect, within seconds: Dask's own client would retry for its connect timeout (30 s) and then
    fail with a traceback. Local clusters and protocols other than tcp/tls are not checked here."""
    if not dask or dask in LOCAL_KINDS:
        return
    address = scheduler_address(dask)
    protocol, _, rest = address.partition("://")
    if protocol not in ("tcp", "tls"):
        return
    parts = urlsplit(f"//{rest}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise InputError(f"run.dask={dask}: not a scheduler address; expected tcp://HOST:PORT (or local)")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except socket.gaierror as exc:
        raise InputError(f"run.dask={dask}: cannot resolve the scheduler's host {host!r} ({exc.strerror})") from None
    except OSError as exc:
        if isinstance(exc, TimeoutError):
            why = f"no answer within {timeout:g} s"
        else:
            why = (exc.strerror or type(exc).__name__).lower()
        raise InputError(
            f"run.dask={dask}: no Dask scheduler answers at {host}:{port} ({why}); "
            "start the scheduler there, or set run.dask to local"
        ) from None


def shard_runner(dask: str, workers: int | None, num_shards: int) -> Any:
    """Dask: local, local-cuda, or a scheduler address."""
    import os

    from prefect_dask import DaskTaskRunner

    if dask == "local":
        n = workers or max(1, min(num_shards, os.cpu_count() or 1))
        return DaskTaskRunner(
            cluster_kwargs={"n_workers": n, "threads_per_worker": 1, "processes": True, "dashboard_address": ":0"}
        )
    if dask == "local-cuda":  # dask-cuda (gpu extra): one worker per visible GPU, each pinned to its device
        return DaskTaskRunner(
            cluster_class="dask_cuda.LocalCUDACluster", cluster_kwargs={"n_workers": workers} if workers else {}
        )
    return DaskTaskRunner(address=scheduler_address(dask))


def api_pinned() -> Any:
    """Pin the API URL actually in use into the settings that travel to Dask workers.

    In ephemeral mode the settings hold no URL, and each worker would start its own temporary server."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        return nullcontext()
    with get_client(sync_client=True) as client:
        url = str(client.api_url)
    return temporary_settings({PREFECT_API_URL: url})


def prepare_workers(runner: Any, dask: str) -> None:
    """What a build needs from the cluster before it submits: the routing plugin on every worker, and, for a
    scheduler address, workers that can reach this build's Prefect API."""
    from ads_prefect.runtime.dask_worker import RouteServicesByApiUrl

    runner.client.register_plugin(RouteServicesByApiUrl())
    if dask not in LOCAL_KINDS:
        from prefect.settings import PREFECT_API_URL

        check_api_reachable(str(PREFECT_API_URL.value() or ""), worker_hosts(runner.client))


def worker_hosts(client: Any) -> set[str]:
    from distributed.comm.addressing import get_address_host

    try:
        return {get_address_host(w) for w in client.scheduler_info()["workers"]}
    except Exception:  # noqa: BLE001 - no scheduler info: nothing to check
        return set()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def local_addresses() -> set[str]:
    """This machine's addresses (every interface), its name, and loopback."""
    import psutil

    found = {"localhost", socket.gethostname()}
    for addrs in psutil.net_if_addrs().values():
        found.update(a.address.split("%")[0] for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6))
    return found


def check_api_reachable(api_url: str, hosts: set[str]) -> None:
    """A Prefect API on loopback (a temporary server, or one bound to 127.0.0.1) cannot be reached by workers on
    other machines: their task runs would vanish from the build's run and their logs fail. Refuse, in one line."""
    api_host = urlsplit(api_url).hostname or ""
    if not _loopback(api_host):
        return
    mine = local_addresses()
    remote = sorted(h for h in hosts if not _loopback(h) and h not in mine)
    if remote:
        raise InputError(
            f"run.dask: workers on other machines ({', '.join(remote[:3])}) cannot reach this build's Prefect API "
            f"at {api_url}; run a server they can reach (`ads server --host 0.0.0.0`) and set PREFECT_API_URL "
            "to its address on every node"
        )


def dask_annotations(stage: Stage, runner: Any) -> Any:
    """The stage's declared resources as Dask worker resources, when the cluster's workers declare any
    (`dask worker --resources "GPU=1,CPU=4"`); a cluster without them would never schedule the task."""
    import dask

    try:
        offered = set().union(*(w.get("resources", {}) for w in runner.client.scheduler_info()["workers"].values()))
    except Exception:  # noqa: BLE001 - no scheduler info: no annotation
        offered = set()
    wanted: dict[str, float] = {}
    if stage.resources.accelerator != "none" and "GPU" in offered:
        wanted["GPU"] = 1
    if stage.resources.cpus and "CPU" in offered:
        wanted["CPU"] = stage.resources.cpus
    return dask.annotate(resources=wanted) if wanted else nullcontext()
