"""The README's Prefect block runs as written, top to bottom, as a user runs it: `ads server` in one terminal
(waited for until it says it is ready), the block's other lines in another with `.venv/bin` on PATH, the worker in
a third; the only change is the port (4200 -> a free one). Its `prefect deployment run` creates a build run and the
worker picks it up (the build itself is tests/flows/test_deploy_e2e.py's), then everything is stopped by PID."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
LONG_RUNNING = ("ads server", "prefect worker start")  # the block's "terminal 1" and "terminal 2" lines


def prefect_block() -> list[str]:
    """The command lines of the README's fenced block under "## Deploy on Prefect" (comment-only lines dropped)."""
    section = README.read_text().split("## Deploy on Prefect", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.slow
def test_the_readme_prefect_block_runs_as_written(helpers: Any, tmp_path: Path):
    port = helpers.free_port()
    lines = [line.replace("4200", str(port)) for line in prefect_block()]
    server_line = next(line for line in lines if line.startswith(LONG_RUNNING[0]))
    worker_line = next(line for line in lines if line.startswith(LONG_RUNNING[1]))
    exports = [line for line in lines if line.startswith("export ")]  # "every terminal"
    first = lines[lines.index(server_line) + 1 : lines.index(worker_line)]
    then = lines[lines.index(worker_line) + 1 :]
    assert first[0].startswith("export PREFECT_PROFILES_PATH=") and then[0].startswith("prefect deployment run")

    checkout = tmp_path / "checkout"  # the repository root as a user has it ($PWD/.prefect is written there)
    checkout.mkdir()
    for name in ("ads_core", "ads_prefect", "ads_cli", "deployments", "pyproject.toml"):
        (checkout / name).symlink_to(helpers.repo / name)
    (tmp_path / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ADS_"))}
    env.update(
        PATH=f"{Path(helpers.prefect).parent}:{env.get('PATH', '')}",
        HOME=str(tmp_path / "home"),
        ADS_CACHE_DIR=str(tmp_path / "cache"),
        ADS_OUT_DIR=str(tmp_path / "out"),
        HF_HUB_OFFLINE="1",
        DO_NOT_TRACK="1",
        PREFECT_WORKER_QUERY_SECONDS="1",
    )

    def terminal(script_lines: list[str], log: str) -> subprocess.Popen[Any]:
        return helpers.start_process(["bash", "-e", "-c", "\n".join(script_lines)], tmp_path / log, env, checkout)

    server = terminal([server_line], "server.log")
    worker = None
    try:
        deadline = time.monotonic() + 240
        while "ads server: ready" not in (tmp_path / "server.log").read_text(errors="replace"):
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()[-3000:]
            time.sleep(0.5)
        steps = subprocess.run(
            ["bash", "-e", "-c", "\n".join(first)], cwd=checkout, env=env, capture_output=True, text=True, timeout=300
        )
        assert steps.returncode == 0, f"{steps.stdout[-3000:]}\n{steps.stderr[-3000:]}"
        assert (checkout / ".prefect" / "profiles.toml").is_file()  # the project's profile, not ~/.prefect's
        assert not (tmp_path / "home" / ".prefect" / "profiles.toml").exists()
        worker = terminal([*exports, worker_line], "worker.log")
        run = subprocess.run(
            ["bash", "-e", "-c", "\n".join([*exports, *then])],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        run_id = re.search(r"UUID: ([0-9a-f-]{36})", run.stdout).group(1)  # type: ignore[union-attr]
        from prefect.client.orchestration import get_client
        from prefect.settings import PREFECT_API_URL, temporary_settings

        with temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{port}/api"}), get_client(sync_client=True) as c:
            deadline = time.monotonic() + 180
            while (state := c.read_flow_run(run_id).state).type.value == "SCHEDULED":  # the worker takes it
                assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
                assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
                time.sleep(1)
        assert state.type.value in {"PENDING", "RUNNING", "COMPLETED"}, state  # picked up: the block works
    finally:
        for proc in (worker, server):
            if proc is not None:
                helpers.stop_process(proc)
