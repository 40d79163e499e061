"""`ads server` on a fresh machine: it creates its PREFECT_HOME, and its UI is told its own API (no browser)."""

from __future__ import annotations

from typing import Any


def test_ads_server_starts_on_a_fresh_machine_and_its_ui_names_its_own_port(ads_server: Any, web: Any):
    # the fixture started `ads server --port <free port>` with an ADS_CACHE_DIR that did not exist
    settings = web.http_json(f"{ads_server.base}/ui-settings")
    assert settings["api_url"] == f"http://127.0.0.1:{ads_server.port}/api"  # not Prefect's default 4200
    home = ads_server.cache / "prefect"
    assert (home / "prefect.db").is_file()  # same home as `ads build` without a server
    # the user's ~/.prefect is left alone (read when it started: a build reporting to it may make one later)
    assert not ads_server.user_prefect_dir_at_start
    first = ads_server.log.read_text().splitlines()[:6]  # what it says before Prefect's own banner
    assert any(f"PREFECT_HOME={home}" in line for line in first), first
    assert any(f"UI's API URL: http://127.0.0.1:{ads_server.port}/api" in line for line in first), first
    lines = ads_server.log.read_text().splitlines()
    ready = next(i for i, line in enumerate(lines) if line.startswith("ads server: ready: Prefect UI at "))
    assert lines[ready] == f"ads server: ready: Prefect UI at http://127.0.0.1:{ads_server.port}"
    assert f"export PREFECT_API_URL=http://127.0.0.1:{ads_server.port}/api" in lines[ready + 1]
