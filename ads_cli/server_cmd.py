"""`ads server`: a local Prefect server with its UI."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ads_cli.common import console
from ads_core.common import defaults


def register(app: typer.Typer) -> None:
    app.command("server")(server_cmd)


def server_cmd(
    host: Annotated[
        str, typer.Option(help="Interface to listen on (keep 127.0.0.1 unless you mean to expose it).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port for the API and the UI.")] = 4200,
) -> None:
    """Start a local Prefect server with its UI, in the foreground (Ctrl-C stops it), to watch builds.

    PREFECT_HOME (its database): yours if you set one, else <ADS cache dir>/prefect, as for `ads build`.

    It is created if missing. Your Prefect profile (`prefect config set`) applies either way.

    The UI talks to this server's own http://HOST:PORT/api (PREFECT_UI_API_URL overrides it, e.g. behind a proxy).

    The first lines say which home and URLs are used and why; "ads server: ready" follows only once the API
    answers (a line every 15 s until then). Builds report here after `export PREFECT_API_URL=http://HOST:PORT/api`.
    """
    import sys

    from ads_prefect.runtime.prefect_env import server_env

    setup = server_env(host, port, defaults.cache_dir())
    try:
        setup.home.mkdir(parents=True, exist_ok=True)  # Prefect makes no parents: its SQLite DB would not open
    except OSError as exc:
        console.print(
            f"[bold red]error:[/] cannot create PREFECT_HOME {setup.home}: {exc}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(code=2) from exc
    ui = setup.api_url.removesuffix("/api")
    lines = [
        f"ads server: starting Prefect's server for {ui} (ready once its API answers)",
        f"  PREFECT_HOME={setup.home}  ({setup.home_why})",
        f"  UI's API URL: {setup.ui_api_url}  ({setup.ui_api_why})",
        *(f"  {note}" for note in setup.notes),
    ]
    console.print("\n".join(lines), highlight=False, soft_wrap=True, markup=False)
    sys.stderr.flush()
    raise typer.Exit(serve(host, port, setup))


def serve(host: str, port: int, setup: Any, wait_s: float = 600.0) -> int:
    """Run `prefect server start` as a child (stopped with this process, however it ends), say it is ready only
    once its API answers /health, and wait for it; returns its exit status."""
    import signal
    import subprocess
    import sys

    from ads_core.common.procs import reap_with_me

    command = [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)]
    child = subprocess.Popen(command, env=setup.env)
    reap_with_me(child.pid)
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    try:
        if wait_until_answers(f"{setup.api_url}/health", child, wait_s):
            ui = setup.api_url.removesuffix("/api")
            console.print(
                f"ads server: ready: Prefect UI at {ui}\n"
                f"  in another shell: export PREFECT_API_URL={setup.api_url}  then `ads build`, `prefect deploy`, "
                "`prefect worker start` report here",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )
        return child.wait()
    except KeyboardInterrupt:  # the terminal's Ctrl-C reached the server too: let it stop cleanly
        try:
            return child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            return 130


def wait_until_answers(url: str, child: Any, wait_s: float, every_s: float = 15.0) -> bool:
    """Poll URL until it answers 200 (True), the server exits, or WAIT_S pass (False, said in one line); a line
    every EVERY_S seconds meanwhile, so a slow start (a loaded machine, a migration) is not silent."""
    import time
    import urllib.error
    import urllib.request

    started = last = time.monotonic()
    while child.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - our own local server
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError, ValueError):
            pass
        now = time.monotonic()
        if now - started > wait_s:
            console.print(f"ads server: {url} did not answer within {wait_s:.0f} s", highlight=False, markup=False)
            return False
        if now - last >= every_s:
            last = now
            console.print(
                f"ads server: waiting for the API at {url} ({now - started:.0f} s)", highlight=False, markup=False
            )
        time.sleep(0.5)
    return False
