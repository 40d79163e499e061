"""How `ads build` picks its Prefect setup, and where a run writes by default (no server needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ads_prefect.runtime.prefect_env import local_prefect_env, profile_api_url


@pytest.fixture()
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for key in [k for k in os.environ if k.startswith("PREFECT_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def test_no_server_means_ephemeral_mode_with_home_under_the_cache(clean_env: Path):
    with local_prefect_env(clean_env / "cache") as url:
        assert url is None
        assert os.environ["PREFECT_HOME"] == str(clean_env / "cache" / "prefect")
        # a fresh machine has no cache dir yet; Prefect would fail to create its home without parents
        assert (clean_env / "cache" / "prefect").is_dir()
        assert int(os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"]) >= 60
    assert "PREFECT_HOME" not in os.environ  # restored


def test_an_api_url_in_the_environment_is_used(clean_env: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    with local_prefect_env(clean_env / "cache") as url:
        assert url == "http://127.0.0.1:4200/api"
        assert os.environ["PREFECT_HOME"] == str(clean_env / "cache" / "prefect")
        # a fresh machine has no cache dir yet; Prefect would fail to create its home without parents
        assert (clean_env / "cache" / "prefect").is_dir()


def test_an_api_url_in_the_active_profile_is_used_with_its_home(clean_env: Path, monkeypatch: pytest.MonkeyPatch):
    home = clean_env / "home" / ".prefect"
    home.mkdir(parents=True)
    (home / "profiles.toml").write_text(
        'active = "local"\n[profiles.local]\nPREFECT_API_URL = "http://127.0.0.1:4311/api"\n'
    )
    assert profile_api_url() == "http://127.0.0.1:4311/api"
    with local_prefect_env(clean_env / "cache") as url:
        assert url == "http://127.0.0.1:4311/api"
        assert "PREFECT_HOME" not in os.environ  # the profile lives in the user's home; keep it


def test_default_output_is_absolute_and_follows_ads_out_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from ads_core.pipeline.resolve import resolve_out

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ADS_OUT_DIR", raising=False)
    assert resolve_out(None, "myds") == str(tmp_path / "ads-out" / "myds")
    monkeypatch.setenv("ADS_OUT_DIR", "s3://bucket/builds/")
    assert resolve_out(None, "myds") == "s3://bucket/builds/myds"
    assert resolve_out("rel/out/", "x") == str(tmp_path / "rel" / "out")


# ---------------------------------------------------------------------------------------------
# `ads server`: which PREFECT_HOME and which API URL its UI is given (tests/browser/ starts a real one)


def test_server_on_a_fresh_machine_uses_the_build_home_and_its_own_api_for_the_ui(clean_env: Path):
    from ads_prefect.runtime.prefect_env import server_env

    setup = server_env("127.0.0.1", 4398, clean_env / "cache")
    assert setup.home == clean_env / "cache" / "prefect" and setup.env["PREFECT_HOME"] == str(setup.home)
    assert setup.env["PREFECT_SERVER_UI_API_URL"] == setup.ui_api_url == setup.api_url == "http://127.0.0.1:4398/api"
    assert "PREFECT_PROFILES_PATH" not in setup.env and "no Prefect profile" in setup.home_why
    assert not setup.notes


def test_server_applies_the_users_profile_and_still_gives_the_ui_its_own_port(clean_env: Path):
    import subprocess
    import sys

    from ads_prefect.runtime.prefect_env import server_env

    profiles = clean_env / "home" / ".prefect" / "profiles.toml"
    profiles.parent.mkdir(parents=True)
    profiles.write_text(
        'active = "mine"\n[profiles.mine]\nPREFECT_API_URL = "http://127.0.0.1:4200/api"\n'
        'PREFECT_LOGGING_LEVEL = "WARNING"\n'
    )
    setup = server_env("127.0.0.1", 4398, clean_env / "cache")
    # the database stays where it was before `prefect config set` wrote that profile
    assert setup.home == clean_env / "cache" / "prefect"
    assert setup.env["PREFECT_PROFILES_PATH"] == str(profiles)
    assert "'mine'" in setup.home_why and str(profiles) in setup.home_why
    assert any("http://127.0.0.1:4200/api" in note and "'mine'" in note for note in setup.notes)
    # what Prefect itself makes of that environment: the profile applies, the UI and the server use this port
    code = (
        "from prefect.settings import get_current_settings as g; s = g(); "
        "print(s.home, s.logging.level, s.server.ui.api_url, s.api.url, sep='|')"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=setup.env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = "http://127.0.0.1:4398/api"
    assert proc.stdout.strip().splitlines()[-1] == f"{setup.home}|WARNING|{own}|{own}"


def test_server_respects_an_explicit_home_and_ui_api_url(clean_env: Path, monkeypatch: pytest.MonkeyPatch):
    from ads_prefect.runtime.prefect_env import server_env

    monkeypatch.setenv("PREFECT_HOME", str(clean_env / "mine"))
    monkeypatch.setenv("PREFECT_UI_API_URL", "https://proxy.example/prefect/api")
    setup = server_env("127.0.0.1", 4398, clean_env / "cache")
    assert setup.home == clean_env / "mine" and "PREFECT_HOME in your environment" in setup.home_why
    assert setup.ui_api_url == "https://proxy.example/prefect/api" and "PREFECT_SERVER_UI_API_URL" not in setup.env
    assert setup.api_url == "http://127.0.0.1:4398/api"


def test_server_urls_for_ipv6_and_wildcard_hosts(clean_env: Path):
    import socket

    from ads_prefect.runtime.prefect_env import server_env

    assert server_env("::1", 4398, clean_env / "cache").ui_api_url == "http://[::1]:4398/api"
    wildcard = server_env("0.0.0.0", 4398, clean_env / "cache")
    assert wildcard.ui_api_url == f"http://{socket.gethostname()}:4398/api"  # a browser cannot use 0.0.0.0
    assert any("PREFECT_UI_API_URL" in note for note in wildcard.notes)


def test_flow_timeouts_come_from_the_environment():
    from ads_prefect.runtime.prefect_env import BUILD_TIMEOUT_S, flow_timeout

    assert flow_timeout("ADS_BUILD_TIMEOUT_S", BUILD_TIMEOUT_S, {}) == 24 * 3600
    assert flow_timeout("ADS_BUILD_TIMEOUT_S", BUILD_TIMEOUT_S, {"ADS_BUILD_TIMEOUT_S": "90"}) == 90
    assert flow_timeout("ADS_BUILD_TIMEOUT_S", BUILD_TIMEOUT_S, {"ADS_BUILD_TIMEOUT_S": "0"}) is None  # no timeout
    with pytest.raises(ValueError, match="ADS_BUILD_TIMEOUT_S='soon' is not a number of seconds"):
        flow_timeout("ADS_BUILD_TIMEOUT_S", BUILD_TIMEOUT_S, {"ADS_BUILD_TIMEOUT_S": "soon"})
    with pytest.raises(ValueError, match=r"ADS_BUILD_TIMEOUT_S=-1 is out of bounds: use at least 0 seconds \(0: no"):
        flow_timeout("ADS_BUILD_TIMEOUT_S", BUILD_TIMEOUT_S, {"ADS_BUILD_TIMEOUT_S": "-1"})
    from ads_prefect.flows.ads_build import ads_build
    from ads_prefect.flows.ads_train import ads_train

    assert ads_build.timeout_seconds == 24 * 3600 and ads_train.timeout_seconds == 7 * 24 * 3600


def test_the_run_forms_help_texts_hold_no_angle_brackets():
    """The Prefect UI drops anything in angle brackets from a help text (`$ADS_OUT_DIR/<dataset>` showed as
    `$ADS_OUT_DIR/`), so placeholders are written `{dataset}`; the browser test looks at the form itself."""
    import json
    import re

    from prefect.utilities.callables import parameter_schema

    from ads_prefect.flows.ads_build import ads_build
    from ads_prefect.flows.ads_train import ads_train

    for flow in (ads_build, ads_train):
        schema = parameter_schema(flow.fn).model_dump()
        found = re.findall(r"<[^<>]*>", json.dumps(schema))
        assert not found, (flow.name, found)
    out = parameter_schema(ads_build.fn).model_dump()["properties"]["out"]["description"]
    assert "$ADS_OUT_DIR/{dataset}, else ./ads-out/{dataset}" in out


FIRST_CALL = """
import json, os, subprocess, sys
seen = []
class Spy(subprocess.Popen):
    def __init__(self, args, *rest, **kwargs):
        if "prefect.server.api.server:create_app" in " ".join(map(str, args)):  # Prefect starts its server
            seen.append((kwargs.get("env") or os.environ).get("PREFECT_SERVER_ANALYTICS_ENABLED"))
            raise OSError("the server is not started in this test")
        super().__init__(args, *rest, **kwargs)
subprocess.Popen = Spy
from ads_prefect.flows.ads_build import ads_build
for users_choice in (None, "true"):
    if users_choice:
        os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = users_choice
    try:
        ads_build(source=sys.argv[1], out=sys.argv[2])
    except Exception:
        pass
    seen.append(os.environ.get("PREFECT_SERVER_ANALYTICS_ENABLED"))  # after the call: as it was before
print("SEEN " + json.dumps(seen))
"""


def test_the_first_in_process_flow_call_starts_prefects_server_without_telemetry(clean_env: Path):
    """Issue 51: the first in-process flow calls (no server configured: Prefect starts a temporary one) printed a
    `sqlite3.OperationalError: database is locked` traceback before their clean Failed states. It came from the
    server's telemetry service, which reads then writes in one deferred SQLite transaction and fails at once
    while the server's start-up writes (it does not happen every time). `ads build` turns that service off; an
    in-process call now does too, unless the user chose otherwise. Prefect's server start is only spied on."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(clean_env / "prefect-home"), HOME=str(clean_env / "home"))
    args = [sys.executable, "-c", FIRST_CALL, str(clean_env / "none.jsonl"), str(clean_env / "out")]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("SEEN ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert json.loads(lines[-1].removeprefix("SEEN ")) == ["false", None, "true", "true"]  # off, unless chosen
