"""Unit tests of the task layer's integrity check, retry rules, locks and artifact keys (no Prefect server)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from ads_core import manifest as mf
from ads_core import storage
from tasks import base
from tasks import locks as locks_module


def ctx(name: str) -> SimpleNamespace:
    return SimpleNamespace(task=SimpleNamespace(name=name))


def write_stage(directory: Path, rows: int) -> str:
    """A one-output stage dir (parquet + manifest.json), like the ads_core stages write."""
    uri = str(directory / "data.parquet")
    storage.write_parquet(uri, pa.table({"x": list(range(rows))}))
    mf.write(str(directory), mf.Manifest(stage="t", inputs={}, outputs={"data": mf.output_entry(uri, rows)},
                                         config={}, code_version="test"))
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

    from ads_core.models import ModelLoadError
    from ads_core.readers import InputError
    from ads_core.sort import InvariantError

    assert base.is_transient(ConnectionResetError("reset"))
    assert base.is_transient(TimeoutError())
    assert base.is_transient(OSError("I/O error"))
    assert base.is_transient(EndpointConnectionError(endpoint_url="http://x"))
    assert base.is_transient(ClientError({"Error": {"Code": "SlowDown"}}, "PutObject"))
    assert not base.is_transient(ClientError({"Error": {"Code": "AccessDenied"}}, "PutObject"))
    for exc in (InputError("bad"), ModelLoadError("no model"), FileNotFoundError("x"), PermissionError("x"),
                ValueError("x"), InvariantError("x"), base.InjectedFault("x"), RuntimeError("x"), None):
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


def test_lock_manager_uses_the_lock_dir_and_breaks_locks_of_dead_processes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(locks_module.LOCK_DIR_ENV, str(tmp_path / "locks"))
    locks = locks_module.BuildLockManager()
    holder = f"{socket.gethostname()}:{os.getpid()}:1:MainThread"
    assert locks.acquire_lock("k1", holder) and (tmp_path / "locks" / "k1.lock").exists()
    assert locks_module.BuildLockManager().is_locked("k1")  # held by a live process: respected
    locks.release_lock("k1", holder)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / "locks" / "k2.lock").write_text(json.dumps({"holder": f"{socket.gethostname()}:{dead}:1:M",
                                                            "expiration": None}))
    assert not locks_module.BuildLockManager().is_locked("k2")  # its holder died: removed
    assert not (tmp_path / "locks" / "k2.lock").exists()
    (tmp_path / "locks" / "k3.lock").write_text(json.dumps({"holder": f"other-host:{dead}:1:M", "expiration": None}))
    assert locks_module.BuildLockManager().is_locked("k3")  # another host's lock is never broken


def test_artifact_keys_are_valid_prefect_keys():
    assert base.artifact_key("GSM8K_sample", "cluster sizes") == "ads-gsm8k-sample-cluster-sizes"
    assert base.artifact_key("Ünï/côde", "x") == "ads-n-c-de-x"
