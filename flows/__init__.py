"""Prefect flows of the ADS pipeline: `ads-build` (flows/ads_build.py) and `ads-train` (flows/ads_train.py).

Flows only compose the tasks in `tasks/`. This `__init__` must not import Prefect: `prepare_prefect_env`
sets the environment that Prefect reads when it is first imported (the `ads build` command calls it).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def profile_api_url() -> str | None:
    """PREFECT_API_URL of the active Prefect profile (read from profiles.toml without importing Prefect)."""
    home = Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    name = os.environ.get("PREFECT_PROFILE") or data.get("active") or "ephemeral"
    value = data.get("profiles", {}).get(name, {}).get("PREFECT_API_URL")
    return str(value) if value else None


def local_prefect_home(cache_dir: Path) -> Path:
    """PREFECT_HOME for `ads build` / `ads server` when the user has not chosen one: <ADS cache dir>/prefect."""
    return Path(os.environ.get("PREFECT_HOME") or cache_dir / "prefect").expanduser()


def prepare_prefect_env(cache_dir: Path) -> str | None:
    """Make `ads build` work with no Prefect setup by hand; call before Prefect is imported.

    - A Prefect API configured (PREFECT_API_URL in the environment or the active profile): used as is;
      returns its URL.
    - Otherwise: Prefect's ephemeral mode, with PREFECT_HOME under the ADS cache dir (so its SQLite DB,
      cache records and build locks persist between builds, never touch ~/.prefect, and `ads server`
      shows the same runs); returns None. Starting the temporary server costs ~10-20 s per command.
    """
    url = os.environ.get("PREFECT_API_URL") or profile_api_url()
    if "PREFECT_HOME" not in os.environ and not (url and "PREFECT_API_URL" not in os.environ):
        # A profile that points at a server lives under the user's PREFECT_HOME: keep that home.
        os.environ["PREFECT_HOME"] = str(local_prefect_home(cache_dir))
    if os.environ.get("PREFECT_HOME"):
        # Prefect creates its home without parents; on a fresh machine the ADS cache dir may not exist yet.
        Path(os.environ["PREFECT_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if url:
        return url
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")  # slow, shared CI boxes
    return None


@contextmanager
def local_prefect_env(cache_dir: Path) -> Iterator[str | None]:
    """`prepare_prefect_env` for the duration of a block; the environment is restored afterwards."""
    saved = dict(os.environ)
    try:
        yield prepare_prefect_env(cache_dir)
    finally:
        for key in set(os.environ) - set(saved):
            del os.environ[key]
        os.environ.update(saved)
