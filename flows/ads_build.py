"""The `ads-build` flow: format -> score shards (mapped) -> merge -> cluster -> sort -> report.

Every stage is a cached task keyed on input content (see `tasks.base`), so rerunning a failed or
finished build resumes from the stages whose inputs did not change. `force_from=<stage>` recomputes
that stage and everything after it. A cached stage whose artifact has vanished or was overwritten is
recomputed (`run_stage`). The shard map runs in-process by default, or on Dask (`dask="local"`,
`"local-cuda"` for one worker per GPU, or a scheduler address). When `trigger_training` is set, the
finished build starts the `ads-train` deployment with the final artifact's URI (`run_deployment`,
`timeout=0`), linked to this run as a child.
"""

from __future__ import annotations

import datetime as dt
import os
from contextlib import nullcontext
from dataclasses import asdict
from typing import Annotated, Any, Literal

from prefect import flow, get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.futures import as_completed
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import Field

from ads_core import defaults, storage
from ads_core.cluster import ClusterConfig
from ads_core.format import FormatConfig, dataset_name
from ads_core.score import ScoreConfig
from tasks.base import StageOutput, artifact_key, intact, retry_delays
from tasks.cluster import cluster_task
from tasks.format import format_stage
from tasks.publish import plot_report, publish, report_clusters, report_format, start_training
from tasks.score import merge_scores_stage, score_shard_stage
from tasks.sort import sort_task

STAGES = ("format", "score", "merge", "cluster", "sort")
Stage = Literal["format", "score", "merge", "cluster", "sort"]
OUT_ENV = "ADS_OUT_DIR"  # default output root for runs without `out` (deployments): $ADS_OUT_DIR/<dataset>


def resolve_source(source: str | None) -> str:
    source = source or defaults.sample_path()
    if "://" not in source and os.path.exists(source):
        return os.path.abspath(source)
    return source


def resolve_out(out: str | None, dataset: str) -> str:
    """`out`, or $ADS_OUT_DIR/<dataset> (default ./ads-out/<dataset>); local paths made absolute."""
    out = out or os.path.join(os.environ.get(OUT_ENV) or defaults.DEFAULT_OUT, dataset)
    if "://" not in out:
        out = os.path.abspath(os.path.expanduser(out))
    return out.rstrip("/")


def build_run_name() -> str:
    """Flow run name: build-<dataset>-<UTC time>."""
    from prefect.runtime import flow_run

    params = flow_run.parameters or {}
    name = params.get("dataset") or dataset_name(resolve_source(params.get("source")))
    return f"build-{name}-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"


def _configured(task_obj: Any, refresh: bool, result_storage: str | None) -> Any:
    options: dict[str, Any] = {"refresh_cache": True if refresh else None, "retry_delay_seconds": retry_delays()}
    if result_storage:
        options["result_storage"] = result_storage
    return task_obj.with_options(**options)


def run_stage(task_obj: Any, label: str, refresh: bool, states: dict[str, str], result_storage: str | None,
              **params: Any) -> StageOutput:
    """Run one cached stage; recompute it when its cached record points at a vanished/changed artifact."""
    state = _configured(task_obj, refresh, result_storage)(**params, return_state=True)
    output: StageOutput = state.result()  # raises the stage's own exception when it failed
    if state.name == "Cached" and not intact(output):
        get_run_logger().warning("%s: the cached artifact %s is missing or changed; recomputing", label,
                                 output["uri"])
        state = _configured(task_obj, True, result_storage)(**params, return_state=True)
        output = state.result()
    states[label] = str(state.name)
    return output


def shard_runner(dask: str | None, workers: int | None, num_shards: int) -> Any:
    """In-process (one shard at a time; the model is loaded once), or Dask: local, local-cuda, or an address."""
    if not dask:
        return ThreadPoolTaskRunner(max_workers=1)
    from prefect_dask import DaskTaskRunner

    if dask == "local":
        n = workers or max(1, min(num_shards, os.cpu_count() or 1))
        return DaskTaskRunner(cluster_kwargs={"n_workers": n, "threads_per_worker": 1, "processes": True,
                                              "dashboard_address": ":0"})
    if dask == "local-cuda":  # dask-cuda (gpu extra): one worker per visible GPU, each pinned to its device
        return DaskTaskRunner(cluster_class="dask_cuda.LocalCUDACluster",
                              cluster_kwargs={"n_workers": workers} if workers else {})
    return DaskTaskRunner(address=dask if "://" in dask else f"tcp://{dask}")


def _api_pinned() -> Any:
    """Pin the API URL actually in use into the settings that travel to Dask workers.

    In ephemeral mode the settings hold no URL, and each worker would start its own temporary server.
    """
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        return nullcontext()
    with get_client(sync_client=True) as client:
        url = str(client.api_url)
    return temporary_settings({PREFECT_API_URL: url})


def score_shards(formatted_uri: str, out: str, config: dict[str, Any], refresh: bool, dataset: str,
                 dask: str | None, dask_workers: int | None, states: dict[str, str],
                 result_storage: str | None) -> list[str]:
    """Map the shard task over shards; a progress artifact advances as each shard finishes."""
    logger = get_run_logger()
    n = int(config["num_shards"])
    progress_id = create_progress_artifact(progress=0.0, key=artifact_key(dataset, "score-progress"),
                                           description=f"scoring {n} shard(s) of {formatted_uri}")
    outputs: dict[int, StageOutput] = {}
    failures: list[tuple[int, Any]] = []
    cached = 0

    def params(i: int) -> dict[str, Any]:
        return {"formatted_uri": formatted_uri, "out": out, "index": i, "config": config}

    with _api_pinned() if dask else nullcontext(), shard_runner(dask, dask_workers, n) as runner:
        task_obj = _configured(score_shard_stage, refresh, result_storage)
        futures = {runner.submit(task_obj, parameters=params(i)): i for i in range(n)}
        for done, future in enumerate(as_completed(list(futures)), start=1):
            i = futures[future]
            future.wait()  # sets the future's final state
            state = future.state
            if state.is_completed():
                output = state.result()
                if state.name == "Cached" and not intact(output):
                    logger.warning("shard %d: the cached artifact %s is missing or changed; recomputing", i,
                                   output["uri"])
                    retry = runner.submit(_configured(score_shard_stage, True, result_storage), parameters=params(i))
                    retry.wait()
                    state = retry.state
                    output = state.result()
                outputs[i] = output
                cached += state.name == "Cached"
            else:
                failures.append((i, state))
            states[f"score-shard-{i}"] = str(state.name)
            update_progress_artifact(artifact_id=progress_id, progress=100.0 * done / n,
                                     description=f"{done}/{n} shards finished ({cached} cached, "
                                                 f"{len(failures)} failed)")
    if failures:
        logger.error("%d of %d shards failed: %s", len(failures), n, sorted(i for i, _ in failures))
        failures[0][1].result()  # raises that shard's exception
    return [outputs[i]["uri"] for i in range(n)]


@flow(name="ads-build", flow_run_name=build_run_name, validate_parameters=True)
def ads_build(
    source: str | None = None,
    dataset: str | None = None,
    out: str | None = None,
    model: str = "default",
    clusters: Annotated[int, Field(ge=1)] = 64,
    shards: Annotated[int, Field(ge=1, le=100_000)] = 1,
    max_length: Annotated[int, Field(ge=8)] = 2048,
    token_budget: Annotated[int, Field(ge=8)] = 16_384,
    text_mode: Literal["question_plus_solution", "question_only"] = "question_plus_solution",
    scoring_backend: Literal["auto", "transformers", "vllm"] = "auto",
    pca_dim: Annotated[int, Field(ge=0)] = 128,
    kmeans_backend: Literal["auto", "faiss", "sklearn", "cuml"] = "auto",
    seed: int = 42,
    question_col: str | None = None,
    solution_col: str | None = None,
    answer_col: str | None = None,
    dask: str | None = None,
    dask_workers: Annotated[int, Field(ge=1)] | None = None,
    force_from: Stage | None = None,
    trigger_training: bool = False,
    train_deployment: str = "ads-train/myds",
    result_storage: str | None = None,
) -> dict[str, Any]:
    """Build OUT/final/train.parquet (clustered, difficulty-sorted) from SOURCE, resuming from cached stages.

    Args:
        source: dataset file, directory, s3:// URI or HF id (local cache); default: the bundled GSM8K sample.
        dataset: dataset name (data_source for rows without one, run name, artifact keys); default: from source.
        out: output root, local path or s3://; default: $ADS_OUT_DIR/<dataset>, else ./ads-out/<dataset>.
        model: policy model for scoring: a local dir, a hub id in the local cache, or `default` (tiny local model).
        clusters: K-Means clusters (clamped for small sets).
        shards: score shards, the units of resume and parallelism.
        max_length: max tokens per row for scoring; longer rows are truncated and flagged.
        token_budget: padded tokens per forward batch.
        text_mode: embed question+solution or the question only.
        scoring_backend: auto, transformers or vllm.
        pca_dim: PCA dimensions before K-Means (0 = off).
        kmeans_backend: auto, faiss, sklearn or cuml.
        seed: K-Means seed.
        question_col: override the detected question column.
        solution_col: override the detected solution column.
        answer_col: override the detected answer column.
        dask: run the shard map on Dask: `local` (LocalCluster), `local-cuda` (dask-cuda, one worker per GPU),
            or a scheduler address such as tcp://10.0.0.5:8786. Default: in-process.
        dask_workers: workers for a local Dask cluster (default: min(shards, CPUs); local-cuda: one per GPU).
        force_from: recompute this stage and every later one (format, score, merge, cluster, sort).
        trigger_training: start `train_deployment` with the final artifact's URI when the build finishes.
        train_deployment: the ads-train deployment to start, `<flow>/<deployment>`.
        result_storage: Prefect block slug for cache records (e.g. remote-file-system/ads-results);
            default: Prefect's configured result storage.
    """
    logger = get_run_logger()
    source = resolve_source(source)
    name = dataset or dataset_name(source)
    out = resolve_out(out, name)
    force = set(STAGES[STAGES.index(force_from):]) if force_from else set()
    format_cfg = FormatConfig(name=name, question_col=question_col, solution_col=solution_col, answer_col=answer_col)
    score_cfg = ScoreConfig(model=model, max_length=max_length, text_mode=text_mode, num_shards=shards,
                            token_budget=token_budget, backend=scoring_backend)
    cluster_cfg = ClusterConfig(num_clusters=clusters, pca_dim=pca_dim or None, backend=kmeans_backend, seed=seed)
    logger.info("ads-build %s: %s -> %s (model %s, %d shard(s), k=%d%s)", name, source, out, model, shards, clusters,
                f", force_from={force_from}" if force_from else "")
    states: dict[str, str] = {}
    rs = result_storage

    formatted = run_stage(format_stage, "format", "format" in force, states, rs,
                          source=source, out=out, config=asdict(format_cfg))
    report_format(formatted["uri"], name)
    shard_uris = score_shards(formatted["uri"], out, asdict(score_cfg), "score" in force, name, dask, dask_workers,
                              states, rs)
    scores = run_stage(merge_scores_stage, "merge", "merge" in force, states, rs,
                       formatted_uri=formatted["uri"], shard_uris=shard_uris, out=out)
    assignments = run_stage(cluster_task, "cluster", "cluster" in force, states, rs,
                            scores_uri=scores["uri"], out=out, config=asdict(cluster_cfg))
    report_clusters(assignments["uri"], name)
    final = run_stage(sort_task, "sort", "sort" in force, states, rs, formatted_uri=formatted["uri"],
                      scores_uri=scores["uri"], assignments_uri=assignments["uri"], out=out, model=model, dataset=name)
    plot = run_stage(plot_report, "plot", "sort" in force, states, rs, final_uri=final["uri"],
                     assignments_uri=assignments["uri"], out=out, dataset=name)
    publish(final["uri"], plot["uri"], name, dict(states))

    train_run_id = None
    if trigger_training:
        from prefect.runtime import flow_run

        train_run_id = start_training(train_deployment, final["uri"], model,
                                      idempotency_key=f"{flow_run.id}:{final['digest']}")
    cached = sum(s == "Cached" for s in states.values())
    logger.info("ads-build %s done: %s (%d of %d stages cached)", name, final["uri"], cached, len(states))
    return {"dataset": name, "source": source, "out": out, "final_uri": final["uri"],
            "formatted_uri": formatted["uri"], "scores_uri": scores["uri"], "assignments_uri": assignments["uri"],
            "plot_uri": plot["uri"], "stages": states, "train_flow_run_id": train_run_id}


def stage_uris(out: str) -> dict[str, str]:
    """Where each artifact lands under OUT (the same layout as `ads_core.build.stage_uris`, plus the report)."""
    from ads_core.build import stage_uris as core_uris

    return {**core_uris(out), "report_plot": storage.join(out, "report", "build_report.png")}
