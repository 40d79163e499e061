"""Fixtures for the Prefect flow tests: one real `prefect server` per run (shared by the xdist workers), a moto S3
server per module, a small real dataset, and helpers. Every process a fixture starts is stopped by its PID, in a
finalizer or, for the run's server, at the run's end, and checked to be gone, even when a test fails."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).with_name("prefect"))
SAMPLE_ROWS = 60


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, timeout: float, proc: subprocess.Popen[Any] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process {proc.pid} exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status < 500:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_process(proc: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """SIGTERM the process group led by PID (started with start_new_session), then SIGKILL; assert it is gone."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(10)
    try:  # stray children of the group (e.g. flow-run subprocesses of a worker)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    assert proc.poll() is not None and not pid_alive(proc.pid), f"process {proc.pid} is still running"


def start_process(args: list[str], log: Path, env: dict[str, str], cwd: Path = REPO) -> subprocess.Popen[Any]:
    """Popen in its own session (so SIGTERM reaches it and its children), output to a log file."""
    with open(log, "ab") as fh:
        return subprocess.Popen(args, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


# ---------------------------------------------------------------------------------------------
# environment


@pytest.fixture(scope="session")
def ads_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Session-wide settings for the ADS code under test: the run's model cache (ADS_CACHE_DIR, always set: by the
    user, `.ci/run` or tests/conftest.py), a private lock dir, fast retries. Restored afterwards."""
    root = tmp_path_factory.mktemp("ads-env")
    values = {
        "ADS_CACHE_DIR": os.environ["ADS_CACHE_DIR"],
        "ADS_LOCK_DIR": str(root / "locks"),
        "ADS_RETRY_BASE_DELAY": "0.05",
        "HF_HUB_OFFLINE": "1",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield values
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def tiny_model(ads_env: dict[str, str]) -> str:
    from ads_core.models import resolve_model

    return resolve_model("default")


@pytest.fixture(scope="session")
def sample_source(run_once: Any) -> Path:
    """A small real dataset: the first 60 GSM8K problems of the bundled sample, at one path for the whole run
    (`run_once`): a build records where its source was read, and a rerun of `clean_build` from another path would
    format it again."""
    from ads_core.common import defaults

    def make(folder: Path) -> str:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "gsm8k60.jsonl"
        lines = Path(defaults.sample_path()).read_text().splitlines()[:SAMPLE_ROWS]
        path.write_text("\n".join(lines) + "\n")
        return str(path)

    return Path(run_once("sample_source", make))


# ---------------------------------------------------------------------------------------------
# Prefect server


@dataclass
class PrefectServer:
    url: str  # http://127.0.0.1:PORT/api
    home: Path
    proc: subprocess.Popen[Any] | None  # None in the workers that did not start it
    log: Path

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for CLI commands and subprocess builds that talk to this server."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env.update(
            PREFECT_API_URL=self.url,
            PREFECT_HOME=str(self.home),
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            DO_NOT_TRACK="1",
        )
        env.update(extra)
        return env


# Server loops no test here relies on (schedules, Late marking, pauses, cancellations, worker health, concurrency
# slot reclaiming, evaluating automations: the deployment test creates one and reads it back, none fires); each
# wakes every 5-20 s, and together they cost an idle server most of its CPU (measured: ~3 s a minute with them
# on, 1.5 s with all but the triggers off, 1.1 s with the triggers off too). Events and task-run recording stay on.
IDLE_SERVICES_OFF = {
    f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false"
    for name in (
        "TRIGGERS",
        "SCHEDULER",
        "LATE_RUNS",
        "PAUSE_EXPIRATIONS",
        "CANCELLATION_CLEANUP",
        "FOREMAN",
        "REPOSSESSOR",
        "CLEANUP_RECONCILER",
    )
}


def start_prefect_server(home: Path, seed: Path, copy_home: Any) -> PrefectServer:
    """`prefect server start` on 127.0.0.1 and a free port, with its own PREFECT_HOME, answering when returned. It
    starts on a copy of SEED's migrated database when there is one (`.ci/run`'s own `ads build` leaves one in the
    ADS cache dir): a fresh database's migrations cost ~13 CPU-s per start."""
    copy_home(seed, home)
    port = free_port()
    server = PrefectServer(url=f"http://127.0.0.1:{port}/api", home=home, proc=None, log=home / "server.log")
    env = server.env(**IDLE_SERVICES_OFF)
    env.pop("PREFECT_API_URL")  # the server itself needs none
    server.proc = start_process(
        [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)], server.log, env
    )
    try:
        wait_http(f"{server.url}/health", 180, server.proc)
    except BaseException:
        stop_process(server.proc)
        raise
    return server


@pytest.fixture(scope="session")
def prefect_server(ads_env: dict[str, str], prefect_home_copy: Any, run_once: Any) -> PrefectServer:
    """One real Prefect server for the whole run (`start_prefect_server`), shared by the xdist workers through
    `run_once`: the first worker that needs it starts it, the others read its record (`prefect.server.json` in the
    run's folder), which pytest's own process reads to stop it by PID once every worker is done
    (tests/conftest.py). Tests tell their runs apart by flow-run id or by names of their own."""
    seed = Path(ads_env["ADS_CACHE_DIR"]) / "prefect"
    started: list[PrefectServer] = []

    def make(folder: Path) -> dict[str, Any]:
        server = start_prefect_server(folder, seed, prefect_home_copy)
        assert server.proc is not None
        started.append(server)
        return {
            "url": server.url,
            "home": str(server.home),
            "log": str(server.log),
            "pid": server.proc.pid,
            "cmdline_has": "prefect server start",
        }

    info = run_once("prefect.server", make)
    if started:
        return started[0]  # it answered before it was recorded
    server = PrefectServer(url=info["url"], home=Path(info["home"]), proc=None, log=Path(info["log"]))
    wait_http(f"{server.url}/health", 60)  # another worker's: it answered when recorded; it still should
    return server


@pytest.fixture(scope="session")
def prefect_api(prefect_server: PrefectServer) -> Iterator[PrefectServer]:
    """In-process flows report to the session server."""
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: prefect_server.url}):
        try:
            yield prefect_server
        finally:
            APILogWorker.drain_all(timeout=5)  # ship pending run logs while the server still answers


# ---------------------------------------------------------------------------------------------
# moto S3


@dataclass
class MotoS3:
    endpoint: str
    proc: subprocess.Popen[Any]
    key_id: str = "AKIAADSTESTKEY0001"
    secret: str = "ads-test-secret-Zq81uXv3"

    def with_bucket(self, bucket: str) -> MotoS3:
        """Create BUCKET (the endpoint only: credentials come from the environment)."""
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
        return self


@pytest.fixture(scope="module")
def moto_s3(tmp_path_factory: pytest.TempPathFactory, monkeypatch_module: pytest.MonkeyPatch) -> Iterator[MotoS3]:
    """moto's standalone S3 server on 127.0.0.1 (test-only dependency), credentials in the environment."""
    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = start_process(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)], log, env
    )
    s3 = MotoS3(endpoint=f"http://127.0.0.1:{port}", proc=proc)
    try:
        wait_http(s3.endpoint, 60, proc)
        for key, value in {
            "ADS_S3_ENDPOINT_URL": s3.endpoint,
            "AWS_ACCESS_KEY_ID": s3.key_id,
            "AWS_SECRET_ACCESS_KEY": s3.secret,
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            monkeypatch_module.setenv(key, value)
        yield s3
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    mp = pytest.MonkeyPatch()
    try:
        yield mp
    finally:
        mp.undo()


# ---------------------------------------------------------------------------------------------
# builds and assertions

K = 4
SHARDS = 2
STAGE_KEYS = ["format", "model", "score-shard-0", "score-shard-1", "merge", "cluster", "sort", "report"]
SECTIONS = ("format", "score", "cluster", "report", "run")


def build_params(**overrides: Any) -> dict[str, Any]:
    """Flow parameters for the small settings every test uses; `section__field=value` overrides one field."""
    params: dict[str, Any] = {
        "dataset": "gsm8k60",
        "cluster": {"num_clusters": K},
        "score": {"num_shards": SHARDS, "max_length": 256},
    }
    for key, value in overrides.items():
        section, sep, name = key.partition("__")
        if sep and section in SECTIONS:
            params.setdefault(section, {})[name] = value
        else:
            params[key] = value
    return params


def run_build(source: Path | str, out: Path | str, **overrides: Any) -> tuple[Any, dict[str, Any] | None]:
    """The flow in-process on the small settings every test uses; returns (state, result or None)."""
    from ads_prefect.flows.ads_build import ads_build

    state = ads_build(source=str(source), out=str(out), return_state=True, **build_params(**overrides))
    return state, (state.result() if state.is_completed() else None)


def read_final(uri: str) -> Any:
    import polars as pl

    from ads_core import storage

    return pl.from_arrow(storage.read_parquet(uri))


def assert_same_rows(a: Any, b: Any) -> None:
    """Row for row equal; extra_info.source_file (where the rows were read from) may differ."""
    assert a.columns == b.columns

    def rows(df: Any) -> list[dict[str, Any]]:
        out = df.to_dicts()
        for row in out:
            row["extra_info"].pop("source_file")
        return out

    assert rows(a) == rows(b)


def task_runs(flow_run_id: Any, settle_s: float = 30.0) -> list[Any]:
    """Task runs of a finished flow run, oldest first (name, state, run_count). The server records task-run states
    from the events the flow sends, after the flow run's own state (seconds later on a busy server shared by the
    workers): wait up to SETTLE_S for every one to be final, then return what the server holds."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.client.schemas.sorting import TaskRunSort

    deadline = time.monotonic() + settle_s
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                sort=TaskRunSort.EXPECTED_START_TIME_ASC,
            )
            if all(r.state and r.state.is_final() for r in runs) or time.monotonic() > deadline:
                return runs
            time.sleep(0.2)  # polling the server's record, with a deadline


def artifacts_of(flow_run_id: Any) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        return client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )


@pytest.fixture(scope="session")
def clean_build(prefect_api: PrefectServer, sample_source: Path, tiny_model: str, run_once: Any) -> dict[str, Any]:
    """A cold build of the 60-row sample, one for the whole run (`run_once`: the xdist workers share it, and the
    server its flow run is in); other tests compare their final artifacts with this one. A test may rerun it
    unchanged (everything cached: only OUT's lock moves), never change it."""

    def make(folder: Path) -> dict[str, Any]:
        state, result = run_build(sample_source, folder / "out")
        assert state.is_completed(), state.message
        assert result is not None
        return {**result, "flow_run_id": str(state.state_details.flow_run_id)}

    return run_once("clean_build", make)


@pytest.fixture(scope="session")
def train_deployment(prefect_api: PrefectServer) -> str:
    """A deployment of the `ads-train` flow on the session server, for the training hand-off. It has no work
    pool, so its runs stay Scheduled until a test puts them in another state; nothing trains."""
    import uuid

    from prefect.client.orchestration import get_client

    name = f"handoff-{uuid.uuid4().hex[:8]}"
    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name("ads-train")
        client.create_deployment(flow_id=flow_id, name=name, entrypoint="ads_prefect/flows/ads_train.py:ads_train")
    return f"ads-train/{name}"


def pending_task_runs(flow_run_id: Any) -> list[str]:
    """Names of the task runs of a flow run that are not in a final state (a finished build should have none)."""
    return [f"{r.name}: {r.state.name}" for r in task_runs(flow_run_id) if not (r.state and r.state.is_final())]


@pytest.fixture(scope="session")
def helpers() -> Any:
    """The helper functions above, for test modules (with --import-mode=importlib they cannot import conftest)."""
    from types import SimpleNamespace

    return SimpleNamespace(
        repo=REPO,
        prefect=PREFECT,
        free_port=free_port,
        wait_http=wait_http,
        pid_alive=pid_alive,
        start_process=start_process,
        stop_process=stop_process,
        run_build=run_build,
        read_final=read_final,
        assert_same_rows=assert_same_rows,
        task_runs=task_runs,
        pending_task_runs=pending_task_runs,
        artifacts_of=artifacts_of,
        K=K,
        SHARDS=SHARDS,
        STAGE_KEYS=STAGE_KEYS,
        build_params=build_params,
    )
