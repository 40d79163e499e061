"""Prefect's process-wide services are keyed on the API URL in effect (no server needed: the services here do
nothing with their client). The end-to-end case, a long-lived Dask worker serving two builds with two APIs, is
tests/flows/test_dask_cluster.py."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

from prefect._internal.concurrency.services import QueueService
from prefect.settings import PREFECT_API_URL, temporary_settings

from ads_prefect.runtime.api_routing import route_services_by_api_url


class Recorder(QueueService[str]):
    """A service like Prefect's: one instance per arguments; it notes the API URL it started under."""

    started_for: list[Any] = []

    @asynccontextmanager
    async def _lifespan(self) -> AsyncGenerator[None, None]:
        Recorder.started_for.append(PREFECT_API_URL.value())  # what a client opened here would talk to
        yield

    async def _handle(self, item: str) -> None:
        return None


def test_each_api_url_gets_its_own_service_started_in_its_own_settings():
    route_services_by_api_url()
    route_services_by_api_url()  # idempotent
    first, second = "http://127.0.0.1:1/api", "http://127.0.0.1:2/api"
    try:
        with temporary_settings({PREFECT_API_URL: first}):
            a = Recorder.instance("names")
            assert Recorder.instance("names") is a  # same URL, same arguments: the same instance
            a.wait_until_empty()
        with temporary_settings({PREFECT_API_URL: second}):
            b = Recorder.instance("names")
            assert b is not a and Recorder.instance("other") is not b  # another URL or other arguments
            b.wait_until_empty()
        with temporary_settings({PREFECT_API_URL: first}):
            assert Recorder.instance("names") is a  # the first build's service is still its own
        assert Recorder.started_for[:2] == [first, second]
    finally:
        Recorder.drain_all()
