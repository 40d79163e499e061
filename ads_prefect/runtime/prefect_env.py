"""The environment Prefect runs in, decided without importing Prefect.

This module must not import Prefect: `prepare_prefect_env` sets the environment that Prefect reads when it is
first imported (the build runner calls it), `server_env` the one `ads server` starts `prefect server start` with,
and `flow_timeout` a flow's time limit from the environment.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ads_core.common.envvars import seconds_from_env


@dataclass(frozen=True)
class Profile:
    """The active Prefect profile as `prefect config set` left it: its name, file and settings."""

    name: str
    path: Path
    settings: dict[str, object]


def active_profile(environ: Mapping[str, str] | None = None) -> Profile | None:
    """The active profile from profiles.toml (read without importing Prefect); None when there is no such file."""
    env = os.environ if environ is None else environ
    home = Path(env.get("PREFECT_HOME") or "~/.prefect").expanduser()
    path = Path(env.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    name = str(env.get("PREFECT_PROFILE") or data.get("active") or "ephemeral")
    settings = data.get("profiles", {}).get(name, {})
    return Profile(name=name, path=path, settings=dict(settings) if isinstance(settings, dict) else {})


def profile_api_url() -> str | None:
    """PREFECT_API_URL of the active Prefect profile."""
    profile = active_profile()
    value = profile.settings.get("PREFECT_API_URL") if profile else None
    return str(value) if value else None


def local_prefect_home(cache_dir: Path) -> Path:
    """PREFECT_HOME for `ads build` / `ads server` when the user has not chosen one: <ADS cache dir>/prefect."""
    return Path(os.environ.get("PREFECT_HOME") or cache_dir / "prefect").expanduser()


def prepare_prefect_env(cache_dir: Path) -> str | None:
    """Make `ads build` work with no Prefect setup by hand; call before Prefect is imported.

    - A Prefect API configured (PREFECT_API_URL in the environment or the active profile): used as is;
      returns its URL.
    - Otherwise: Prefect's ephemeral mode, with PREFECT_HOME under the ADS cache dir (so its SQLite DB
      persists between builds, never touches ~/.prefect, and `ads server` shows the same runs); returns None.
      Starting the temporary server costs ~10-20 s per command.
    """
    url = os.environ.get("PREFECT_API_URL") or profile_api_url()
    if "PREFECT_HOME" not in os.environ and not (url and "PREFECT_API_URL" not in os.environ):
        # A profile that points at a server lives under the user's PREFECT_HOME: keep that home.
        os.environ["PREFECT_HOME"] = str(local_prefect_home(cache_dir))
    if os.environ.get("PREFECT_HOME"):
        # Prefect creates its home without parents; on a fresh machine the ADS cache dir may not exist yet.
        Path(os.environ["PREFECT_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)
    os.environ.setdefault(ANALYTICS_ENV, "false")
    if url:
        return url
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")  # slow, shared CI boxes
    return None


ANALYTICS_ENV = "PREFECT_SERVER_ANALYTICS_ENABLED"


@contextmanager
def quiet_temporary_server() -> Iterator[None]:
    """While a flow is called in this process: the temporary server Prefect may start for it (ephemeral mode)
    runs without its telemetry service, as `ads build`'s does (`prepare_prefect_env`), unless the user set
    PREFECT_SERVER_ANALYTICS_ENABLED. That service reads and then writes in one deferred SQLite transaction, which
    fails at once with `database is locked` while the server's start-up writes, and the server printed that
    traceback on our stderr before the first flow calls' clean states (issue 51); an offline tool phones nobody.
    The server reads the variable when Prefect starts it, inside the outermost call."""
    if ANALYTICS_ENV in os.environ:
        yield
        return
    os.environ[ANALYTICS_ENV] = "false"
    try:
        yield
    finally:
        if os.environ.get(ANALYTICS_ENV) == "false":
            del os.environ[ANALYTICS_ENV]


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


BUILD_TIMEOUT_ENV, BUILD_TIMEOUT_S = "ADS_BUILD_TIMEOUT_S", 24 * 3600.0
TRAIN_TIMEOUT_ENV, TRAIN_TIMEOUT_S = "ADS_TRAIN_TIMEOUT_S", 7 * 24 * 3600.0


def flow_timeout(variable: str, default_s: float, environ: Mapping[str, str] | None = None) -> float | None:
    """A flow's `timeout_seconds` from the environment (seconds; 0: none), else DEFAULT_S.

    Read when the flow module is imported, which a worker does for every flow run it starts, so a deployment
    sets it per deployment in `job_variables.env` (deployments/prefect.yaml). A run past it ends TimedOut (a
    Failed state), which the failure automation reports.
    """
    return seconds_from_env(variable, default_s, why=" (0: no timeout)", environ=environ) or None


WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def url_host(host: str) -> str:
    """How HOST appears in a URL: IPv6 in brackets; a wildcard bind as this machine's name, which a browser
    (here or elsewhere) can reach, unlike 0.0.0.0."""
    if host in WILDCARD_HOSTS:
        import socket

        return socket.gethostname() or "127.0.0.1"
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True)
class ServerEnv:
    """What `ads server` starts Prefect with, and why, in words for its first lines."""

    env: dict[str, str]
    home: Path
    home_why: str
    api_url: str  # this server's own API, for `export PREFECT_API_URL=...`
    ui_api_url: str  # the API the UI in the browser talks to
    ui_api_why: str
    notes: list[str]


def server_env(host: str, port: int, cache_dir: Path, environ: Mapping[str, str] | None = None) -> ServerEnv:
    """Environment for `prefect server start --host HOST --port PORT`, decided without importing Prefect.

    - PREFECT_HOME (the server's database): the user's PREFECT_HOME (environment, or set in their profile);
      otherwise <ADS cache dir>/prefect, the home of `ads build`'s ephemeral mode, so earlier local builds show
      up, and the same before and after `prefect config set` writes a profile. Created with its parents.
    - The user's active Prefect profile (~/.prefect/profiles.toml) still applies, through PREFECT_PROFILES_PATH:
      under another home Prefect would silently ignore it.
    - The UI's API URL: this server's own http://HOST:PORT/api, unless PREFECT_SERVER_UI_API_URL /
      PREFECT_UI_API_URL is set (e.g. behind a proxy). Prefect would otherwise derive it from PREFECT_API_URL
      or its default port 4200, and the UI of a server on another port could not reach its API. The server
      process itself gets PREFECT_API_URL of its own API, whatever the profile says.
    """
    env = dict(os.environ if environ is None else environ)
    profile = active_profile(env)
    mine = (
        f"your Prefect profile {profile.name!r} in {profile.path} applies"
        if profile is not None
        else "no Prefect profile of yours"
    )
    if env.get("PREFECT_HOME"):
        home, why = Path(env["PREFECT_HOME"]).expanduser(), f"from PREFECT_HOME in your environment; {mine}"
    elif profile is not None and profile.settings.get("PREFECT_HOME"):
        home = Path(str(profile.settings["PREFECT_HOME"])).expanduser()
        why = f"PREFECT_HOME from {mine.removesuffix(' applies')}"
    else:
        home = local_prefect_home(cache_dir)
        why = f"the same home as `ads build` without a server; {mine}"
    env["PREFECT_HOME"] = str(home)
    if profile is not None:
        env.setdefault("PREFECT_PROFILES_PATH", str(profile.path))
    api_url = f"http://{url_host(host)}:{port}/api"
    chosen = next((k for k in ("PREFECT_SERVER_UI_API_URL", "PREFECT_UI_API_URL") if env.get(k)), None)
    if chosen:
        ui_api_url, ui_why = env[chosen], f"from {chosen} in your environment"
    else:
        env["PREFECT_SERVER_UI_API_URL"] = ui_api_url = api_url
        ui_why = "this server's own API"
    client_url, where = env.get("PREFECT_API_URL"), "your environment"
    if not client_url and profile is not None and profile.settings.get("PREFECT_API_URL"):
        client_url, where = str(profile.settings["PREFECT_API_URL"]), f"profile {profile.name!r}"
    local = "127.0.0.1" if host in WILDCARD_HOSTS else url_host(host)
    env["PREFECT_API_URL"] = f"http://{local}:{port}/api"  # for the server process itself: its own API
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    notes = []
    if host in WILDCARD_HOSTS and not chosen:
        notes.append(
            f"note: listening on all interfaces; a browser elsewhere must resolve {url_host(host)!r}, "
            f"or set PREFECT_UI_API_URL=http://<this machine's address>:{port}/api"
        )
    if client_url and client_url.rstrip("/") != api_url:
        notes.append(
            f"note: PREFECT_API_URL is {client_url} (from {where}): commands that use it report there, "
            "not to this server"
        )
    return ServerEnv(
        env=env, home=home, home_why=why, api_url=api_url, ui_api_url=ui_api_url, ui_api_why=ui_why, notes=notes
    )
