"""Unit tests of the task layer's cache key, integrity check, retry rules, locks and keys (no Prefect server)."""

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


def ctx(name: str) -> SimpleNamespace:
    return SimpleNamespace(task=SimpleNamespace(name=name))


def write_stage(directory: Path, rows: int) -> str:
    """A one-output stage dir (parquet + manifest.json), like the ads_core stages write."""
    uri = str(directory / "data.parquet")
    storage.write_parquet(uri, pa.table({"x": list(range(rows))}))
    mf.write(str(directory), mf.Manifest(stage="t", inputs={}, outputs={"data": mf.output_entry(uri, rows)},
                                         config={}, code_version="test"))
    return uri


def test_key_follows_content_not_paths(tmp_path: Path):
    a = write_stage(tmp_path / "a", 5)
    b = write_stage(tmp_path / "b", 5)  # same bytes at another path
    c = write_stage(tmp_path / "c", 6)
    key = base.content_key(ctx("cluster"), {"scores_uri": a, "out": "/o", "config": {"k": 4}})
    assert key == base.content_key(ctx("cluster"), {"scores_uri": b, "out": "/o", "config": {"k": 4}})
    assert key != base.content_key(ctx("cluster"), {"scores_uri": c, "out": "/o", "config": {"k": 4}})
    assert key != base.content_key(ctx("cluster"), {"scores_uri": a, "out": "/o", "config": {"k": 5}})
    assert key != base.content_key(ctx("cluster"), {"scores_uri": a, "out": "/other", "config": {"k": 4}})
    assert key != base.content_key(ctx("sort"), {"scores_uri": a, "out": "/o", "config": {"k": 4}})
    lists = base.content_key(ctx("merge_scores"), {"shard_uris": [a, c], "out": "/o"})
    assert lists != base.content_key(ctx("merge_scores"), {"shard_uris": [c, a], "out": "/o"})


def test_key_includes_the_wrapped_ads_core_code():
    import tasks.cluster  # noqa: F401 - importing a task module registers its code version
    import tasks.score  # noqa: F401
    from ads_core import cluster, score

    assert base._CODE_VERSIONS["cluster"] == mf.code_version(cluster)
    assert base._CODE_VERSIONS["score_shard"] == mf.code_version(score)
    a = base.content_key(ctx("cluster"), {"out": "/o"})
    base._CODE_VERSIONS["cluster"] = "0.0.0+edited"
    try:
        assert base.content_key(ctx("cluster"), {"out": "/o"}) != a
    finally:
        base._CODE_VERSIONS["cluster"] = mf.code_version(cluster)


def test_source_key_uses_path_and_content(tmp_path: Path):
    src = tmp_path / "d.jsonl"
    src.write_text('{"question": "1+1", "answer": "#### 2"}\n')
    key = base.content_key(ctx("format"), {"source": str(src), "out": "/o", "config": {}})
    assert key == base.content_key(ctx("format"), {"source": str(src), "out": "/o", "config": {}})
    src.write_text('{"question": "1+2", "answer": "#### 3"}\n')
    assert key != base.content_key(ctx("format"), {"source": str(src), "out": "/o", "config": {}})
    assert base.source_digest("some-org/some-dataset") == "id:some-org/some-dataset"


def test_artifact_digest_reads_the_manifest_and_falls_back_to_hashing(tmp_path: Path):
    uri = write_stage(tmp_path / "s", 3)
    assert base.artifact_digest(uri) == storage.content_hash(uri)
    (tmp_path / "s" / "manifest.json").unlink()
    assert base.artifact_digest(uri) == storage.content_hash(uri)


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
    monkeypatch.setenv(base.LOCK_DIR_ENV, str(tmp_path / "locks"))
    locks = base.BuildLockManager()
    holder = f"{socket.gethostname()}:{os.getpid()}:1:MainThread"
    assert locks.acquire_lock("k1", holder) and (tmp_path / "locks" / "k1.lock").exists()
    assert base.BuildLockManager().is_locked("k1")  # held by a live process: respected
    locks.release_lock("k1", holder)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    (tmp_path / "locks" / "k2.lock").write_text(json.dumps({"holder": f"{socket.gethostname()}:{dead}:1:M",
                                                            "expiration": None}))
    assert not base.BuildLockManager().is_locked("k2")  # its holder died: removed
    assert not (tmp_path / "locks" / "k2.lock").exists()
    (tmp_path / "locks" / "k3.lock").write_text(json.dumps({"holder": f"other-host:{dead}:1:M", "expiration": None}))
    assert base.BuildLockManager().is_locked("k3")  # another host's lock is never broken


def test_artifact_keys_are_valid_prefect_keys():
    assert base.artifact_key("GSM8K_sample", "cluster sizes") == "ads-gsm8k-sample-cluster-sizes"
    assert base.artifact_key("Ünï/côde", "x") == "ads-n-c-de-x"


def test_model_fingerprint_changes_with_the_model_config(tmp_path: Path):
    from tasks.score import model_fingerprint

    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 8}')
    (model / "model.safetensors").write_bytes(b"0" * 10)
    first = model_fingerprint(str(model))
    assert first == model_fingerprint(str(model))
    (model / "config.json").write_text('{"hidden_size": 16}')
    assert model_fingerprint(str(model)) != first
    assert model_fingerprint("org/not-cached-model").startswith("hub:org/not-cached-model")
