"""`ads server`: a local Prefect server with its UI."""

from __future__ import annotations

from typing import Annotated

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

    The first lines say which home and URLs are used and why. Builds report here after
    `export PREFECT_API_URL=http://HOST:PORT/api`.
    """
    import os
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
    lines = [
        f"ads server: Prefect UI at {setup.api_url.removesuffix('/api')}",
        f"  PREFECT_HOME={setup.home}  ({setup.home_why})",
        f"  UI's API URL: {setup.ui_api_url}  ({setup.ui_api_why})",
        *(f"  {note}" for note in setup.notes),
        f"  in another shell: export PREFECT_API_URL={setup.api_url}  then `ads build`, `prefect deploy`, "
        "`prefect worker start` report here",
    ]
    console.print("\n".join(lines), highlight=False, soft_wrap=True, markup=False)
    sys.stderr.flush()
    os.execve(
        sys.executable,
        [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)],
        setup.env,
    )
