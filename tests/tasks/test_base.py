"""Unit tests of the task layer's integrity check, retry rules, locks and artifact keys (no Prefect server)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from ads_core import storage
from ads_core.storage import manifest as mf
from ads_prefect.tasks import base
from ads_prefect.tasks import locks as locks_module


def ctx(name: str) -> SimpleNamespace:
    return SimpleNamespace(task=SimpleNamespace(name=name))


def write_stage(directory: Path, rows: int) -> str:
    """A one-output stage dir (parquet + manifest.json), like the ads_core stages write."""
    uri = str(directory / "data.parquet")
    storage.write_parquet(uri, pa.table({"x": list(range(rows))}))
    mf.write(
        str(directory),
        mf.Manifest(stage="t", inputs={}, outputs={"data": mf.output_entry(uri, rows)}, config={}, code_version="test"),
    )
    return uri


def test_artifact_hash_reads_the_manifest_and_falls_back_to_hashing(tmp_path: Path):
    uri = write_stage(tmp_path / "s", 3)
    manifest = mf.read(str(tmp_path / "s"))
    manifest.outputs["data"]["sha256"] = "sha256:recorded"  # what the stage recorded, not re-hashed
    mf.write(str(tmp_path / "s"), manifest)
    assert mf.artifact_hash(uri) == "sha256:recorded"
    (tmp_path / "s" / "manifest.json").unlink()
    assert mf.artifact_hash(uri) == storage.content_hash(uri) != "sha256:recorded"


def test_intact_detects_vanished_and_replaced_outputs(tmp_path: Path):
    uri = write_stage(tmp_path / "s", 3)
    record = base.stage_output(mf.read(str(tmp_path / "s")), "data")
    assert record["uri"] == uri and base.intact(record)
    write_stage(tmp_path / "s", 4)  # another build overwrote the stage, consistently
    assert not base.intact(record)
    Path(uri).unlink()
    assert not base.intact(base.stage_output(mf.read(str(tmp_path / "s")), "data"))


def test_transient_errors_are_retried_and_bad_input_is_not():
    from botocore.exceptions import ClientError, EndpointConnectionError

    from ads_core.core.errors import InputError
    from ads_core.models import ModelLoadError
    from ads_core.stages.sort import InvariantError

    assert base.is_transient(ConnectionResetError("reset"))
    assert base.is_transient(TimeoutError())
    assert base.is_transient(OSError("I/O error"))
    assert base.is_transient(EndpointConnectionError(endpoint_url="http://x"))
    assert base.is_transient(ClientError({"Error": {"Code": "SlowDown"}}, "PutObject"))
    assert not base.is_transient(ClientError({"Error": {"Code": "AccessDenied"}}, "PutObject"))
    for exc in (
        InputError("bad"),
        ModelLoadError("no model"),
        FileNotFoundError("x"),
        PermissionError("x"),
        ValueError("x"),
        InvariantError("x"),
        base.InjectedFault("x"),
        RuntimeError("x"),
        None,
    ):
        assert not base.is_transient(exc), exc


def test_retry_condition_reads_the_failed_state():
    from prefect.states import Failed

    assert base.retry_if_transient(ctx("t").task, None, Failed(data=ConnectionResetError("reset")))
    assert not base.retry_if_transient(ctx("t").task, None, Failed(data=ValueError("bad input")))


def test_retry_delays_back_off_exponentially(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(base.RETRY_DELAY_ENV, "0.5")
    assert base.retry_delays(3) == [0.5, 1.0, 2.0]


def test_fault_hook_only_fires_for_listed_stages(monkeypatch: pytest.MonkeyPatch):
    base.fault_point("sort")
    monkeypatch.setenv(base.FAULT_ENV, "cluster, sort")
    with pytest.raises(base.InjectedFault):
        base.fault_point("sort")
    base.fault_point("format")


def dead_pid() -> int:
    return int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )


def test_live_locks_are_respected_and_dead_holders_taken_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(locks_module.LOCK_DIR_ENV, str(tmp_path / "locks"))
    locks = locks_module.BuildLockManager()
    assert locks.acquire_lock("k1", "me") and (tmp_path / "locks" / "k1.lock").exists()
    record = json.loads((tmp_path / "locks" / "k1.lock").read_text())
    assert record["pid"] == os.getpid() and record["host"] == socket.gethostname() and record["lease_until"]
    other = locks_module.BuildLockManager()
    assert other.is_locked("k1") and not other.is_lock_holder("k1", "you")
    assert not other.wait_for_lock("k1", timeout=0.3)  # held by a live process: respected
    locks.release_lock("k1", "me")
    assert not other.is_locked("k1")

    stale = {"holder": "x", "host": socket.gethostname(), "pid": dead_pid(), "lease_until": time.time() + 600}
    (tmp_path / "locks" / "k2.lock").write_text(json.dumps(stale))
    assert other.acquire_lock("k2", "you", acquire_timeout=2)  # its holder died: taken over at once
    (tmp_path / "locks" / "k3.lock").write_text(json.dumps({"holder": "uuid-only", "expiration": None}))
    os.utime(tmp_path / "locks" / "k3.lock", (time.time() - 60, time.time() - 60))
    assert other.acquire_lock("k3", "you", acquire_timeout=2)  # Prefect's own format: no holder to wait for


def test_another_hosts_lock_holds_until_its_lease_expires(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(locks_module.LOCK_DIR_ENV, str(tmp_path))
    remote = {"holder": "h", "host": "other-host", "pid": dead_pid(), "lease_until": time.time() + 600}
    (tmp_path / "k.lock").write_text(json.dumps(remote))
    locks = locks_module.BuildLockManager()
    assert locks.is_locked("k")  # its pid means nothing here; only the lease counts
    (tmp_path / "k.lock").write_text(json.dumps({**remote, "lease_until": time.time() - 1}))
    assert not locks.is_locked("k") and not (tmp_path / "k.lock").exists()


def test_the_heartbeat_renews_the_lease_and_waiting_gives_up_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(locks_module.LOCK_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(locks_module.LEASE_ENV, "0.6")
    monkeypatch.setenv(locks_module.WAIT_ENV, "1")
    holder = locks_module.BuildLockManager()
    assert holder.acquire_lock("k", "me")
    first = json.loads((tmp_path / "k.lock").read_text())["lease_until"]
    time.sleep(1.2)  # two lease lengths: without renewal the lock would have expired
    assert json.loads((tmp_path / "k.lock").read_text())["lease_until"] > first
    with pytest.raises(locks_module.LockWaitTimeout, match=f"held by .*:{os.getpid()}") as info:
        locks_module.BuildLockManager().acquire_lock("k", "you")
    assert "\n" not in str(info.value) and locks_module.WAIT_ENV in str(info.value)
    holder.release_all()
    assert not (tmp_path / "k.lock").exists()


def test_artifact_keys_are_valid_prefect_keys():
    assert base.artifact_key("GSM8K_sample", "cluster sizes") == "ads-gsm8k-sample-cluster-sizes"
    assert base.artifact_key("Ünï/côde", "x") == "ads-n-c-de-x"


def test_progress_shows_an_eta_only_from_a_measured_rate(monkeypatch: pytest.MonkeyPatch):
    """The first update (rows found in the cache, or a first batch after loading a model) starts the clock: the
    time before it is not work the rest repeats, and counting it made the first ETA wildly long."""
    import logging

    import prefect.artifacts

    from ads_core.config.build import BuildConfig
    from ads_core.pipeline.stages import layout, stages_by_name
    from ads_core.stages.base import StageContext
    from ads_prefect.tasks import stage_task

    now = [1000.0]
    shown: list[str] = []
    monkeypatch.setattr(stage_task, "time", SimpleNamespace(monotonic=lambda: now[0]))
    monkeypatch.setattr(stage_task, "get_run_logger", lambda: logging.getLogger("test"))
    monkeypatch.setattr(prefect.artifacts, "update_progress_artifact", lambda **kw: shown.append(kw["description"]))
    ctx = StageContext(source="", out="/tmp/x", dataset="d", config=BuildConfig(), layout=layout())
    factory = stage_task.with_artifact("artifact-id", stages_by_name()["score"], ctx, 0, every_s=0.0)
    with factory("score shard 1/1", 1000) as advance:
        now[0] += 300.0  # loading the model: 5 minutes before anything is counted
        advance(100)  # 100 rows from the row cache, at once
        assert shown[-1] == "score: score shard 1/1 100/1000 rows"  # no rate, no ETA yet
        now[0] += 10.0
        advance(50)  # the first measured batch: 50 rows in 10 s
        assert shown[-1] == "score: score shard 1/1 150/1000 rows, 5.0 rows/s, ETA 170 s"
    assert shown[0] == "score: score shard 1/1..."  # the phase is named before its first update
