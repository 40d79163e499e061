"""The `ads-build` flow against a real Prefect server: artifacts and UI, resume after a failure, changed and
reverted sources, force_from, vanished artifacts, bad input, concurrent builds, Dask, and `ads build`."""

from __future__ import annotations

import base64
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ads_core.locks.manager import held_locks
from ads_core.stages.sort import check_invariants


@pytest.fixture(scope="module")
def h(helpers: Any) -> Any:
    """conftest's helpers: run_build, read_final, assert_same_rows, task_runs, process control, K, SHARDS."""
    return helpers


def test_cold_build_meets_invariants_and_publishes_ui_artifacts(h: Any, clean_build: dict[str, Any]):
    assert list(clean_build["stages"]) == h.STAGE_KEYS
    assert set(clean_build["stages"].values()) == {"Completed"}
    final = h.read_final(clean_build["final_uri"])
    check_invariants(final, 60)
    assert final["cluster_id"].n_unique() == h.K
    out = Path(clean_build["out"])
    for rel in (
        "formatted/train.parquet",
        "scores/shards/shard-00000-of-00002/scores.parquet",
        "scores/shards/shard-00001-of-00002/manifest.json",
        "scores/scores.parquet",
        "clusters/assignments.parquet",
        "final/train.parquet",
        "final/manifest.json",
    ):
        assert (out / rel).is_file(), rel
    png = out / "report" / "build_report.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    arts = {a.key: a for a in h.artifacts_of(clean_build["flow_run_id"])}
    assert {
        "ads-gsm8k60-format-counts",
        "ads-gsm8k60-cluster-sizes",
        "ads-gsm8k60-difficulty-quantiles",
        "ads-gsm8k60-cluster-examples",
        "ads-gsm8k60-final",
        "ads-gsm8k60-report-plot",
        "ads-gsm8k60-score-progress",
        "ads-gsm8k60-summary",
        "ads-gsm8k60-cluster-terms",
        "ads-gsm8k60-cluster-terms-image",
        "ads-gsm8k60-refresh",
    } <= set(arts)
    assert "rows: 60 added" not in arts["ads-gsm8k60-refresh"].data  # a first build has nothing to compare with
    assert "no previous build to compare with" in arts["ads-gsm8k60-refresh"].data
    assert arts["ads-gsm8k60-format-counts"].type == "table"
    sizes = json.loads(arts["ads-gsm8k60-cluster-sizes"].data)
    assert sum(row["size"] for row in sizes) == 60 and len(sizes) == h.K
    quantiles = json.loads(arts["ads-gsm8k60-difficulty-quantiles"].data)
    assert [row["cluster_id"] for row in quantiles] == list(range(h.K))
    assert all(row["q00"] <= row["q50"] <= row["q100"] for row in quantiles)
    assert arts["ads-gsm8k60-cluster-examples"].type == "markdown"
    assert "## cluster 0" in arts["ads-gsm8k60-cluster-examples"].data
    assert arts["ads-gsm8k60-score-progress"].type == "progress"
    assert float(arts["ads-gsm8k60-score-progress"].data) == 100.0
    assert float(arts["ads-gsm8k60-model-progress"].data) == 100.0  # the model step: its own, finished, progress
    assert "model" in clean_build["refresh"]["stage_seconds"]  # its time booked under its own name
    assert clean_build["final_uri"] in arts["ads-gsm8k60-final"].data
    plot = arts["ads-gsm8k60-report-plot"]  # the PNG inline (a browser refuses file:// links from a page)
    assert plot.type == "markdown" and "file://" not in plot.data
    inline = plot.data.split("data:image/png;base64,", 1)[1].split(")", 1)[0]
    assert base64.b64decode(inline) == png.read_bytes()


def test_rerun_is_all_cached_and_retries_a_failed_training(
    h: Any, clean_build: dict[str, Any], sample_source: Path, train_deployment: str
):
    """An unchanged rerun computes nothing: every stage's task run ends Cached with its manifest's summary (the
    manifests are the one cache; Prefect holds no result of it). With on_change it starts training on the final
    artifact once, and after that run failed, the next unchanged rerun starts the next attempt. No task run is left
    Pending."""
    from prefect.client.orchestration import get_client
    from prefect.states import Failed

    assert not h.pending_task_runs(clean_build["flow_run_id"])
    hand_off = {"run__trigger_training": "on_change", "run__train_deployment": train_deployment}
    state, result = h.run_build(sample_source, clean_build["out"], **hand_off)
    assert set(result["stages"].values()) == {"Cached"}
    shown = {r.name: r.state for r in h.task_runs(state.state_details.flow_run_id) if r.name in h.STAGE_KEYS}
    assert {name: s.name for name, s in shown.items()} == dict.fromkeys(h.STAGE_KEYS, "Cached")
    assert shown["format"].message == "reused: rows_in 60, rows_out 60, rows_rejected 0"
    assert all(s.message.startswith("reused: ") and s.data is None for s in shown.values()), shown
    assert result["final_uri"] == clean_build["final_uri"]
    first = result["train_flow_run_id"]
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(first)
        assert result["refresh"]["training"] == f"started {train_deployment} run {run.name}"
        assert result["flow_run"]["name"].startswith("build-gsm8k60-")
        assert not h.pending_task_runs(state.state_details.flow_run_id)  # the hand-off leaves no Pending task run
        client.set_flow_run_state(first, Failed(message="RuntimeError: CUDA error"), force=True)

    state, again = h.run_build(sample_source, clean_build["out"], **hand_off)
    assert again["refresh"]["training"].startswith(f"retrying training: run {run.name} Failed, attempt 2 of 3: started")
    assert again["train_flow_run_id"] not in (None, first)
    assert not h.pending_task_runs(state.state_details.flow_run_id)


def test_resume_after_a_failure_in_the_last_stage(
    h: Any, sample_source: Path, clean_build: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    out = tmp_path / "out"
    monkeypatch.setenv("ADS_TEST_FAIL_STAGE", "sort")
    state, _ = h.run_build(sample_source, out)
    assert state.is_failed()
    runs = {r.name: r for r in h.task_runs(state.state_details.flow_run_id)}
    assert runs["sort"].state.is_failed() and runs["sort"].run_count == 1  # an injected fault is not retried
    assert "injected failure" in runs["sort"].state.message
    assert not (out / "final" / "train.parquet").exists()

    monkeypatch.delenv("ADS_TEST_FAIL_STAGE")
    state, result = h.run_build(sample_source, out)
    assert state.is_completed()
    stages = result["stages"]
    assert {stages[k] for k in ["format", "score-shard-0", "score-shard-1", "merge", "cluster"]} == {"Cached"}
    assert stages["sort"] == "Completed"
    h.assert_same_rows(h.read_final(result["final_uri"]), h.read_final(clean_build["final_uri"]))


def test_changed_source_recomputes_from_format_and_reverting_it_is_never_stale(
    h: Any, sample_source: Path, clean_build: dict[str, Any], tmp_path: Path
):
    source = tmp_path / "data.jsonl"
    shutil.copy(sample_source, source)
    out = tmp_path / "out"
    _, first = h.run_build(source, out)
    h.assert_same_rows(h.read_final(first["final_uri"]), h.read_final(clean_build["final_uri"]))

    lines = source.read_text().splitlines()
    source.write_text("\n".join(lines[:-1]) + "\n")  # one problem fewer
    _, changed = h.run_build(source, out)
    assert changed["stages"].pop("model") == "Cached"  # the same policy: only its fingerprint was needed
    assert set(changed["stages"].values()) == {"Completed"}
    assert h.read_final(changed["final_uri"]).height == 59

    source.write_text("\n".join(lines) + "\n")  # back to the original: records exist, but disk holds 59 rows
    _, reverted = h.run_build(source, out)
    assert reverted["stages"]["format"] == "Completed"
    # The same rows and difficulties as the clean build; cluster ids now carry over from the 59-row build
    # (a warm start), so only the per-row values are compared, not the row order.
    by_id = ["sample_id", "difficulty", "reward_model"]
    got = h.read_final(reverted["final_uri"]).select(by_id).sort("sample_id")
    assert got.equals(h.read_final(clean_build["final_uri"]).select(by_id).sort("sample_id"))


def test_force_from_cluster_recomputes_cluster_and_sort_only(
    h: Any, sample_source: Path, clean_build: dict[str, Any], tmp_path: Path
):
    out = tmp_path / "out"  # a copy: the clean build stays the reference other tests compare with
    shutil.copytree(clean_build["out"], out)
    h.run_build(sample_source, out)  # this OUT's own manifests (the copied ones describe the clean OUT)
    _, result = h.run_build(sample_source, out, run__force_from="cluster")
    stages = result["stages"]
    assert {stages[k] for k in ["format", "score-shard-0", "score-shard-1", "merge"]} == {"Cached"}
    assert stages["cluster"] == "Completed" and stages["sort"] == "Completed"
    final = h.read_final(result["final_uri"])
    check_invariants(final, 60)  # re-clustered from this OUT's own centroids: ids may move, rows may not
    by_id = ["sample_id", "difficulty", "reward_model"]
    assert (
        final.select(by_id)
        .sort("sample_id")
        .equals(h.read_final(clean_build["final_uri"]).select(by_id).sort("sample_id"))
    )


def test_a_vanished_artifact_is_recomputed_not_trusted(
    h: Any, sample_source: Path, clean_build: dict[str, Any], tmp_path: Path
):
    out = tmp_path / "out"
    shutil.copytree(clean_build["out"], out)
    _, warm = h.run_build(sample_source, out)  # a new OUT: computed once, then cached
    (out / "clusters" / "assignments.parquet").unlink()
    (out / "scores" / "shards" / "shard-00001-of-00002" / "scores.parquet").write_bytes(b"not parquet")
    _, result = h.run_build(sample_source, out)
    stages = result["stages"]
    assert stages["format"] == "Cached" and stages["score-shard-0"] == "Cached"
    assert stages["score-shard-1"] == "Completed" and stages["cluster"] == "Completed"
    assert stages["merge"] == "Cached" and stages["sort"] == "Cached"  # same content again: keys match
    h.assert_same_rows(h.read_final(result["final_uri"]), h.read_final(clean_build["final_uri"]))


def test_bad_input_fails_fast_with_its_message_and_no_retry(h: Any, prefect_api, tmp_path: Path):
    from ads_core.common.errors import InputError

    source = tmp_path / "bad.jsonl"
    source.write_text('{"foo": 1}\n{"foo": 2}\n')
    t0 = time.monotonic()
    state, _ = h.run_build(source, tmp_path / "out")
    assert state.is_failed()
    with pytest.raises(InputError, match="no question"):
        state.result()
    runs = {r.name: r for r in h.task_runs(state.state_details.flow_run_id)}
    assert runs["format"].run_count == 1
    assert time.monotonic() - t0 < 30


@pytest.mark.slow
def test_two_concurrent_builds_into_one_out_run_one_after_the_other(
    h: Any, prefect_api: Any, sample_source: Path, tiny_model: str, tmp_path: Path
):
    """Two processes build the same dataset into the same OUT at once: the OUT lock lets one build run while
    the other waits (and says so); the second then finds every stage done and reads it as Cached. So the work
    is done once, by one build, and the artifact is intact. Each has its own ADS_CACHE_DIR and neither sets
    ADS_LOCK_DIR (issue 51: the lock lived in the cache folder, so such builds both ran, the second rebuilding
    final/ under the first)."""
    out = tmp_path / "out"
    params = h.build_params(score__model=tiny_model)  # the session's model: no tiny build in either cache folder
    script = (
        "import json, sys, time\n"
        "from ads_prefect.flows.ads_build import ads_build\n"
        "t0 = time.time()\n"
        f"r = ads_build(source={str(sample_source)!r}, out={str(out)!r}, **{params!r})\n"
        "print('RESULT ' + json.dumps([t0, time.time(), r['stages']]))\n"
    )
    envs = [
        prefect_api.env(ADS_CACHE_DIR=str(tmp_path / f"cache-{i}"), PREFECT_LOGGING_LEVEL="WARNING") for i in (0, 1)
    ]
    for env in envs:
        env.pop("ADS_LOCK_DIR", None)
    procs = [h.start_process([sys.executable, "-c", script], tmp_path / f"build{i}.log", envs[i]) for i in (0, 1)]
    try:
        for proc in procs:
            proc.wait(300)
    finally:
        for proc in procs:
            h.stop_process(proc)
    runs = []
    for i in range(2):
        log = (tmp_path / f"build{i}.log").read_text()
        lines = [line for line in log.splitlines() if line.startswith("RESULT ")]
        assert lines, log[-3000:]
        runs.append(json.loads(lines[-1][len("RESULT ") :]))
    (start_a, end_a, _), (start_b, end_b, _) = runs
    assert start_a < end_b and start_b < end_a, runs  # the two processes really ran at the same time
    stages = [states for _, _, states in runs]
    first = 0 if stages[0][h.STAGE_KEYS[0]] == "Completed" else 1
    assert all(stages[first][key] == "Completed" for key in h.STAGE_KEYS), stages
    assert all(stages[1 - first][key] == "Cached" for key in h.STAGE_KEYS), stages
    final = h.read_final(str(out / "final" / "train.parquet"))
    check_invariants(final, 60)
    assert not held_locks()  # every lock released


@pytest.mark.slow
def test_shard_map_on_a_local_dask_cluster(h: Any, sample_source: Path, clean_build: dict[str, Any], tmp_path: Path):
    state, result = h.run_build(sample_source, tmp_path / "out", run__dask="local", run__dask_workers=2)
    assert state.is_completed(), state.message
    assert result["stages"]["score-shard-0"] == "Completed" and result["stages"]["score-shard-1"] == "Completed"
    h.assert_same_rows(h.read_final(result["final_uri"]), h.read_final(clean_build["final_uri"]))
    runs = [r for r in h.task_runs(state.state_details.flow_run_id) if r.name.startswith("score-shard")]
    assert len(runs) == h.SHARDS and all(r.state.is_completed() for r in runs)  # recorded from the Dask workers
