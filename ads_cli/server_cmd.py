"""`ads server`: a local Prefect server with its UI."""

from __future__ import annotations

from typing import Annotated

import typer

from ads_cli.common import console
from ads_core import defaults


def register(app: typer.Typer) -> None:
    app.command("server")(server_cmd)


def server_cmd(
    host: Annotated[str, typer.Option(help="Interface to listen on (keep 127.0.0.1 unless you mean to expose it).")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port for the API and the UI.")] = 4200,
) -> None:
    """Start a local Prefect server with its UI, in the foreground (Ctrl-C stops it), to watch builds.

    It uses the same PREFECT_HOME as `ads build` (default: <ADS cache dir>/prefect), so earlier local builds
    show up too. Point builds at it with `export PREFECT_API_URL=http://HOST:PORT/api`.
    """
    import os
    import sys

    from flows import local_prefect_home

    home = local_prefect_home(defaults.cache_dir())
    env = {**os.environ, "PREFECT_HOME": str(home)}
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    console.print(f"Prefect UI: http://{host}:{port}  (PREFECT_HOME={home})\n"
                  f"in another shell: export PREFECT_API_URL=http://{host}:{port}/api  then `ads build`, "
                  "`prefect deploy`, `prefect worker start` report here", highlight=False, soft_wrap=True)
    os.execve(sys.executable, [sys.executable, "-m", "prefect", "server", "start", "--host", host,
                               "--port", str(port)], env)
