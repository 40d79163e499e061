"""How `ads build` picks its Prefect setup, and where a run writes by default (no server needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flows import local_prefect_env, profile_api_url


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
    (home / "profiles.toml").write_text('active = "local"\n[profiles.local]\n'
                                        'PREFECT_API_URL = "http://127.0.0.1:4311/api"\n')
    assert profile_api_url() == "http://127.0.0.1:4311/api"
    with local_prefect_env(clean_env / "cache") as url:
        assert url == "http://127.0.0.1:4311/api"
        assert "PREFECT_HOME" not in os.environ  # the profile lives in the user's home; keep it


def test_default_output_is_absolute_and_follows_ads_out_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from flows.ads_build import resolve_out

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ADS_OUT_DIR", raising=False)
    assert resolve_out(None, "myds") == str(tmp_path / "ads-out" / "myds")
    monkeypatch.setenv("ADS_OUT_DIR", "s3://bucket/builds/")
    assert resolve_out(None, "myds") == "s3://bucket/builds/myds"
    assert resolve_out("rel/out/", "x") == str(tmp_path / "rel" / "out")
