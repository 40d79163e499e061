"""Unit tests of the task layer: the stage task's one cache, retry rules and artifact keys (no Prefect server); locks
are in test_locks.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from ads_core import storage
from ads_core.storage import manifest as mf
from ads_prefect.tasks import artifact_keys as keys
from ads_prefect.tasks import faults, retries


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


def test_no_stage_task_has_a_prefect_cache_or_a_persisted_result():
    """OUT's manifests are the build's one cache: a Prefect cache policy or a persisted result would be a second."""
    from prefect.cache_policies import NO_CACHE

    from ads_core.pipeline.stages import STAGES
    from ads_prefect.tasks.stage_task import configured, stage_task

    runs = [configured(stage, shard) for stage in STAGES for shard in ((0, 1) if stage.sharded else (None,))]
    for task in (stage_task, *runs):
        assert (task.cache_policy, task.persist_result, task.result_storage) == (NO_CACHE, False, None), task.name
        assert (task.cache_key_fn, task.refresh_cache, task.result_storage_key) == (None, None, None), task.name
    assert [t.task_run_name for t in runs[:4]] == ["format", "model", "score-shard-0", "score-shard-1"]


def test_a_reused_stage_ends_cached_with_its_manifests_summary():
    from ads_prefect.tasks.stage_task import cached

    manifest = mf.Manifest(
        stage="format",
        inputs={},
        outputs={},
        config={},
        code_version="test",
        counts={"rows_in": 60, "rows_out": 59, "rows_rejected": 1},
        extra={"layout": "marker"},
    )
    state = cached(manifest, "/out/formatted/train.parquet")
    assert (state.type.value, state.name) == ("COMPLETED", "Cached")
    assert state.message == "reused: rows_in 60, rows_out 59, rows_rejected 1; layout marker"
    assert state.result() == "/out/formatted/train.parquet"
    empty = mf.Manifest(stage="model", inputs={}, outputs={}, config={}, code_version="test")
    assert cached(empty, "/out/model/model.json").message == "reused: its manifest records this stage key"


def test_transient_errors_are_retried_and_bad_input_is_not():
    from botocore.exceptions import ClientError, EndpointConnectionError

    from ads_core.common.errors import InputError
    from ads_core.models import ModelLoadError
    from ads_core.stages.sort import InvariantError

    assert retries.is_transient(ConnectionResetError("reset"))
    assert retries.is_transient(TimeoutError())
    assert retries.is_transient(OSError("I/O error"))
    assert retries.is_transient(EndpointConnectionError(endpoint_url="http://x"))
    assert retries.is_transient(ClientError({"Error": {"Code": "SlowDown"}}, "PutObject"))
    assert not retries.is_transient(ClientError({"Error": {"Code": "AccessDenied"}}, "PutObject"))
    for exc in (
        InputError("bad"),
        ModelLoadError("no model"),
        FileNotFoundError("x"),
        PermissionError("x"),
        ValueError("x"),
        InvariantError("x"),
        faults.InjectedFault("x"),
        RuntimeError("x"),
        None,
    ):
        assert not retries.is_transient(exc), exc


def test_retry_condition_reads_the_failed_state():
    from prefect.states import Failed

    assert retries.retry_if_transient(ctx("t").task, None, Failed(data=ConnectionResetError("reset")))
    assert not retries.retry_if_transient(ctx("t").task, None, Failed(data=ValueError("bad input")))


def test_retry_delays_back_off_exponentially(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(retries.RETRY_DELAY_ENV, "0.5")
    assert retries.retry_delays(3) == [0.5, 1.0, 2.0]


def test_fault_hook_only_fires_for_listed_stages(monkeypatch: pytest.MonkeyPatch):
    faults.fault_point("sort")
    monkeypatch.setenv(faults.FAULT_ENV, "cluster, sort")
    with pytest.raises(faults.InjectedFault):
        faults.fault_point("sort")
    faults.fault_point("format")


def test_artifact_keys_are_valid_prefect_keys():
    assert keys.artifact_key("GSM8K_sample", "cluster sizes") == "ads-gsm8k-sample-cluster-sizes"
    assert keys.artifact_key("Ünï/côde", "x") == "ads-n-c-de-x"


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
