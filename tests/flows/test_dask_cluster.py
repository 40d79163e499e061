"""`ads-build` on a real Dask cluster: a `dask scheduler` and two `dask worker` processes, each in its own
folder with its own HOME, temp and cache dir and no lock dir, a moto S3 server holding OUT, the row score
cache and the build lock, and the session's Prefect server (issue 22).

One test, to pay for the processes once: build A (its Prefect API reached through a forwarder, as a temporary
server would be) loses a worker to kill -9 while that worker scores a shard; build B, from another working
directory, with the forwarder gone and the direct API URL, runs on the same long-lived worker, scores nothing
and reuses every row through the S3 cache. The worker that ran A must report B's task runs to B's API.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest

BUCKET = "ads-cluster"
CACHE = f"s3://{BUCKET}/score-cache"
SHARDS = 4
TOLERANCE = {"float32": 1e-4, "float16": 5e-3, "bfloat16": 3e-2}  # relative, by the dtype the rows were scored in


@pytest.fixture(scope="module")
def h(helpers: Any) -> Any:
    return helpers


class Forwarder:
    """A TCP forwarder to the Prefect server: an API URL of its own, which `stop()` makes unreachable (every open
    connection closed too), like the temporary server of an `ads build` that has finished."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def _accept(self) -> None:
        while not self.stopped:
            try:
                client, _ = self.listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                return
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        self.stopped = True
        for s in [self.listener, *self.sockets]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


@pytest.fixture(scope="module")
def s3(moto_s3: Any, prefect_api: Any) -> Any:
    """The bucket (endpoint only)."""
    return moto_s3.with_bucket(BUCKET)


def worker_env(home: Path, **extra: str) -> dict[str, str]:
    """What a worker machine has: the storage endpoint and credentials, its own HOME, temp and cache dir; no
    Prefect settings, no lock dir, none of the test session's ADS settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PREFECT_", "ADS_", "PYTEST_")) or k.startswith("ADS_S3_")
    }
    for name in ("HOME", "TMPDIR", "cache"):
        (home / name.lower()).mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home / "home"),
        TMPDIR=str(home / "tmpdir"),
        ADS_CACHE_DIR=str(home / "cache"),
        HF_HUB_OFFLINE="1",
        DO_NOT_TRACK="1",
        OMP_NUM_THREADS="1",  # a nanny would set it; these workers run without one (kill -9 takes the worker)
        TOKENIZERS_PARALLELISM="false",  # and the two settings docs/prefect.md gives every scoring worker
        DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED="False",
        ADS_RETRY_BASE_DELAY="0.05",
    )
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def cluster(h: Any, s3: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """`dask scheduler` and two `dask worker` processes (no nanny), each in its own folder; w2 pauses at its first
    progress tick in the score stage (rows scored, nothing stored), so the test can kill it there. Returns once
    the scheduler listens; `wait_for_workers()` waits for both workers (they import torch & co. meanwhile)."""
    root = tmp_path_factory.mktemp("cluster")
    dask = str(Path(sys.executable).with_name("dask"))
    port = h.free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs: dict[str, Any] = {}
    marker = root / "w2-paused"

    def wait_for_workers() -> None:
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=300)

    try:
        (root / "scheduler").mkdir()
        procs["scheduler"] = h.start_process(
            [dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            root / "scheduler.log",
            worker_env(root / "scheduler"),
            cwd=root / "scheduler",
        )
        for name, extra in (("w1", {}), ("w2", {"ADS_TEST_PAUSE_STAGE": f"score@progress:{marker}:600"})):
            home = root / name
            home.mkdir()
            args = [dask, "worker", address, "--name", name, "--nthreads", "1", "--no-nanny", "--no-dashboard"]
            args += ["--local-directory", str(home / "dask"), "--death-timeout", "60"]
            args += ["--preload", "ads_prefect.runtime.dask_worker"]  # imports at start, as the docs recommend
            procs[name] = h.start_process(args, root / f"{name}.log", worker_env(home, **extra), cwd=home)
        deadline = time.monotonic() + 120
        while True:  # the scheduler listens within seconds, the workers take longer
            try:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or procs["scheduler"].poll() is not None:
                    raise
                time.sleep(0.3)
        yield SimpleNamespace(address=address, procs=procs, root=root, marker=marker, wait_for_workers=wait_for_workers)
    finally:
        for proc in procs.values():
            h.stop_process(proc)


def read_table(uri: str) -> Any:
    import polars as pl

    from ads_core import storage

    return pl.from_arrow(storage.read_parquet(uri))


def assert_equivalent(got: Any, want: Any, rtol: float) -> None:
    """The same sample_ids in the same order, the same clusters, difficulties within the dtype's tolerance, and
    every other value equal (extra_info.source_file, where the rows were read from, aside)."""
    assert got["sample_id"].to_list() == want["sample_id"].to_list()
    assert got["cluster_id"].to_list() == want["cluster_id"].to_list()
    np.testing.assert_allclose(got["difficulty"].to_numpy(), want["difficulty"].to_numpy(), rtol=rtol)

    def rest(df: Any) -> list[dict[str, Any]]:
        rows = df.drop("difficulty").to_dicts()
        for row in rows:
            for name in ("source_file", "difficulty"):
                row["extra_info"].pop(name, None)
        return rows

    assert rest(got) == rest(want)


def cache_rows() -> Any:
    """Every row of every part of the S3 score cache (all namespaces), with the part it is in."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ads_core import storage

    fs, path = storage.get_fs(CACHE)
    parts = sorted(p for p in fs.find(path, refresh=True) if p.rsplit("/", 1)[-1].startswith("part-"))
    tables = [pq.read_table(io.BytesIO(fs.cat_file(p)), columns=["row_key"]) for p in parts]
    return parts, pa.concat_tables(tables).column("row_key").to_pylist() if tables else []


def shard_runs(h: Any, flow_run_id: Any, timeout: float = 60.0) -> dict[str, str]:
    """The score-shard task runs the flow run's API recorded (Prefect learns them from the workers' events)."""
    deadline = time.monotonic() + timeout
    while True:
        runs = {r.name: r.state.name for r in h.task_runs(flow_run_id) if r.name.startswith("score-shard")}
        if len(runs) == SHARDS and set(runs.values()) == {"Completed"} or time.monotonic() > deadline:
            return runs
        time.sleep(0.5)


def manifest(uri: str) -> dict[str, Any]:
    from ads_core import storage

    return json.loads(storage.read_bytes(uri))


@pytest.mark.slow
def test_builds_on_a_long_lived_dask_cluster_of_separate_processes(
    h: Any,
    cluster: Any,
    s3: Any,
    prefect_api: Any,
    sample_source: Path,
    tiny_model: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
):
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from ads_core.locks.manager import out_lock_key
    from ads_core.locks.place import store_for
    from ads_core.locks.store import free_because

    monkeypatch.delenv("ADS_LOCK_DIR")  # OUT's lock lives in its bucket: the workers share no folder with us
    options = dict(
        score__num_shards=SHARDS,
        score__model=tiny_model,  # the model path every node has
        score__cache_uri=CACHE,
        run__dask=cluster.address,
    )
    w2 = cluster.procs["w2"]
    clean_build = request.getfixturevalue("clean_build")  # the in-process build (while the workers start)
    # The workers have caches of their own, so `auto` would time bf16 against fp32 again in each (this CPU has
    # bf16 without AMX), and a loaded machine can decide otherwise there: score in the in-process build's dtype.
    clean_scores = str(Path(clean_build["final_uri"]).parent.parent / "scores" / "manifest.json")
    options["score__dtype"] = manifest(clean_scores)["extra"]["dtype"]
    cluster.wait_for_workers()  # both, so that w2 gets shards

    def kill_w2_mid_shard() -> None:
        deadline = time.monotonic() + 300
        while not cluster.marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if cluster.marker.exists():
            os.kill(w2.pid, signal.SIGKILL)

    # build A: its API through a forwarder; w2 is killed -9 while it scores a shard
    killer = threading.Thread(target=kill_w2_mid_shard, daemon=True)
    killer.start()
    forwarder = Forwarder(urlsplit(prefect_api.url).port)
    try:
        with temporary_settings({PREFECT_API_URL: forwarder.url()}):
            state_a, a = h.run_build(sample_source, f"s3://{BUCKET}/builds/a", **options)
            assert state_a.is_completed(), state_a.message
            runs_a = shard_runs(h, state_a.state_details.flow_run_id)
            APILogWorker.drain_all(timeout=5)
    finally:
        forwarder.stop()
    killer.join(1)
    assert int(cluster.marker.read_text()) == w2.pid and w2.wait(10) == -signal.SIGKILL  # killed mid-shard
    assert runs_a == {f"score-shard-{i}": "Completed" for i in range(SHARDS)}  # rescheduled, done, recorded
    scores = manifest(f"s3://{BUCKET}/builds/a/scores/manifest.json")
    rtol = TOLERANCE[scores["extra"]["dtype"]]
    final_a = read_table(a["final_uri"])
    assert_equivalent(final_a, read_table(clean_build["final_uri"]), rtol)  # the in-process build's artifact
    assert scores["counts"]["rows"] == final_a.height == h.read_final(clean_build["final_uri"]).height
    assert scores["counts"]["rows_scored"] == final_a.height  # a cold cache: every row scored once
    parts, keys = cache_rows()
    assert len(keys) == len(set(keys)) == final_a.height  # no row lost or stored twice, killed shard included
    lock = store_for(a["out"]).newest(out_lock_key(a["out"]))  # in the bucket, released
    assert lock is not None and lock.number >= 1 and free_because(lock) == "released"

    # build B: another working directory, A's API gone, the same cluster (w1 ran A), the same rows
    elsewhere = tmp_path / "another-machine"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    state_b, b = h.run_build(sample_source, f"s3://{BUCKET}/builds/b", **options)
    assert state_b.is_completed(), state_b.message
    assert {k: v for k, v in b["stages"].items() if k.startswith("score-shard")} == {
        f"score-shard-{i}": "Completed" for i in range(SHARDS)
    }
    assert shard_runs(h, state_b.state_details.flow_run_id) == {
        f"score-shard-{i}": "Completed" for i in range(SHARDS)
    }  # the worker that ran A reported B's task runs to B's API
    counts = manifest(f"s3://{BUCKET}/builds/b/scores/manifest.json")["counts"]
    assert counts["rows_scored"] == 0 and counts["rows_reused"] == final_a.height  # all through the S3 cache
    assert cache_rows() == (parts, keys)  # nothing added
    h.assert_same_rows(read_table(b["final_uri"]), final_a)  # the same stored scores: identical
    for worker in ("w1", "w2"):  # the workers wrote nothing of the build locally
        assert not [p for p in (cluster.root / worker).rglob("*.parquet")], worker


def test_an_unreachable_scheduler_is_one_line_naming_run_dask(h: Any, tmp_path: Path):
    from typer.testing import CliRunner

    from ads_cli.main import app

    address = f"tcp://127.0.0.1:{h.free_port()}"
    result = CliRunner().invoke(app, ["build", "--dask", address, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()  # output that is not a terminal also gets progress lines
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and errors[0] == lines[-1], result.output
    assert errors[0].startswith("error: run.dask=") and address in errors[0], result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out" / "formatted").exists()


def test_workers_on_other_machines_need_an_api_they_can_reach():
    from ads_core.common.errors import InputError
    from ads_prefect.runtime.dask import check_api_reachable

    check_api_reachable("http://127.0.0.1:4200/api", {"127.0.0.1"})  # all workers here: fine
    check_api_reachable("http://198.51.100.5:4200/api", {"192.0.2.9"})  # a server on the network: fine
    with pytest.raises(InputError, match=r"run.dask: workers on other machines \(192.0.2.9\) cannot reach"):
        check_api_reachable("http://127.0.0.1:4200/api", {"127.0.0.1", "192.0.2.9"})
