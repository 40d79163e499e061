"""The `ads-build` flow: the stages of `ads_core.stages.STAGES`, each through the generic cached task.

format -> score shards (mapped) -> merge -> cluster -> sort -> report. Every stage is keyed on input
content (`ads_core.stages.stage_key`), so rerunning a failed or finished build resumes from the
stages whose inputs did not change. `run.force_from=<stage>` recomputes that stage and everything
after it. A cached stage whose artifact has vanished or was overwritten is recomputed
(`tasks.stage_task.checked`). The shard map runs in-process by default, or on Dask (`dask="local"`,
`"local-cuda"` for one worker per GPU, or a scheduler address). Builds into one OUT run one at a time
(`tasks.locks.owning`). With `run.trigger_training=on_change` (or `always`), the finished build starts
the `ads-train` deployment with the final artifact's URI (`run_deployment`, `timeout=0`, idempotent on
the artifact's content digest), linked to this run as a child. Every build ends with a refresh summary.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from contextlib import nullcontext
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.futures import as_completed

from ads_core import defaults, storage
from ads_core.config import BuildConfig, ClusterConfig, FormatConfig, ReportConfig, RunConfig, ScoreConfig
from ads_core.format import dataset_name
from ads_core.names import safe_name
from ads_core.readers import InputError
from ads_core.refresh import row_identities, summarize
from ads_core.stages import STAGES, BuildContext, Stage, stages_from
from tasks.base import StageOutput, artifact_key
from tasks.locks import owning
from tasks.publish import publish, publish_refresh, report_clusters, report_format, start_training
from tasks.stage_task import checked, configured, flow_spelling, params_of, run_checked

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
    fmt = params.get("format")
    given = fmt.get("name") if isinstance(fmt, dict) else getattr(fmt, "name", None)
    name = params.get("dataset") or given or dataset_name(resolve_source(params.get("source")))
    return f"build-{name}-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"


def shard_runner(dask: str | None, workers: int | None, num_shards: int) -> Any:
    """Dask: local, local-cuda, or a scheduler address."""
    from prefect_dask import DaskTaskRunner

    if dask == "local":
        n = workers or max(1, min(num_shards, os.cpu_count() or 1))
        return DaskTaskRunner(
            cluster_kwargs={"n_workers": n, "threads_per_worker": 1, "processes": True, "dashboard_address": ":0"}
        )
    if dask == "local-cuda":  # dask-cuda (gpu extra): one worker per visible GPU, each pinned to its device
        return DaskTaskRunner(
            cluster_class="dask_cuda.LocalCUDACluster", cluster_kwargs={"n_workers": workers} if workers else {}
        )
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


def score_shards(stage: Stage, ctx: BuildContext, refresh: bool, states: dict[str, str]) -> None:
    """Run the shard task for every shard: in this thread one after another (the model is loaded once, and
    Ctrl-C / SIGTERM reach the computing stage), or mapped on Dask. A progress artifact follows them."""
    logger = get_run_logger()
    run_cfg = ctx.config.run
    n = ctx.config.score.num_shards
    progress_id = create_progress_artifact(
        progress=0.0,
        key=artifact_key(ctx.dataset, "score-progress"),
        description=f"scoring {n} shard(s) of {ctx.uri('formatted')}",
    )
    failures: list[tuple[int, Any]] = []
    cached = 0
    rs = run_cfg.result_storage

    def params(i: int, refresh_now: bool) -> dict[str, Any]:
        return {**params_of(stage, ctx, i, reuse=not refresh_now), "progress_artifact": str(progress_id)}

    def record(done: int, i: int, state: Any, recompute: Any) -> None:
        nonlocal cached
        if state.is_completed():
            _, state = checked(state, recompute, stage.label(i))
            cached += state.name == "Cached"
        else:
            failures.append((i, state))
        states[stage.label(i)] = str(state.name)
        update_progress_artifact(
            artifact_id=progress_id,
            progress=100.0 * done / n,
            description=f"{done}/{n} shards finished ({cached} cached, {len(failures)} failed)",
        )

    if not run_cfg.dask:
        for i in range(n):
            state = configured(stage, i, refresh, rs)(**params(i, refresh), return_state=True)
            record(i + 1, i, state, lambda i=i: configured(stage, i, True, rs)(**params(i, True), return_state=True))
    else:
        with _api_pinned(), shard_runner(run_cfg.dask, run_cfg.dask_workers, n) as runner:

            def recompute(i: int) -> Any:
                retry = runner.submit(configured(stage, i, True, rs), parameters=params(i, True))
                retry.wait()
                return retry.state

            futures = {
                runner.submit(configured(stage, i, refresh, rs), parameters=params(i, refresh)): i for i in range(n)
            }
            for done, future in enumerate(as_completed(list(futures)), start=1):
                i = futures[future]
                future.wait()  # sets the future's final state
                record(done, i, future.state, lambda i=i: recompute(i))
    if failures:
        logger.error("%d of %d shards failed: %s", len(failures), n, sorted(i for i, _ in failures))
        failures[0][1].result()  # raises that shard's exception


def run_stages(ctx: BuildContext) -> tuple[dict[str, str], dict[str, float], dict[str, StageOutput], Any]:
    """Every declared stage in order (the shard map for the sharded one), with its UI tables."""
    force = stages_from(ctx.config.run.force_from)
    states: dict[str, str] = {}
    seconds: dict[str, float] = {}
    outputs: dict[str, StageOutput] = {}
    previous = row_identities(ctx.uri("final"))  # before this build replaces it
    for stage in STAGES:
        t0 = time.perf_counter()
        if stage.sharded:
            score_shards(stage, ctx, stage.name in force, states)
        else:
            outputs[stage.name], state = run_checked(
                stage, ctx, None, stage.name in force, ctx.config.run.result_storage
            )
            states[stage.name] = str(state.name)
        seconds[stage.name] = time.perf_counter() - t0
        if stage.name == "format":
            report_format(outputs["format"]["uri"], ctx.dataset)
        elif stage.name == "cluster":
            report_clusters(outputs["cluster"]["uri"], ctx.dataset)
    publish(outputs["report"]["uri"], outputs["sort"]["uri"], ctx.dataset, dict(states))
    return states, seconds, outputs, previous


def mark_crashed(dead: dict[str, Any]) -> None:
    """A build killed while it held this OUT left its flow run Running: mark it Crashed."""
    holder = str(dead.get("holder", ""))
    if not holder.startswith("flow-run:"):
        return
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    run_id = holder.removeprefix("flow-run:")
    try:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(run_id)
            if not run.state or not run.state.is_final():
                client.set_flow_run_state(
                    run_id, Crashed(message="its process died; a later build took over its output folder"), force=True
                )
                get_run_logger().warning(
                    "flow run %s (%s) was left Running by a dead process: marked Crashed", run.name, run_id
                )
    except Exception as exc:  # noqa: BLE001 - another server, or the run is gone: nothing to mark
        get_run_logger().info("could not mark the earlier flow run %s Crashed: %s", run_id, exc)


@flow(name="ads-build", flow_run_name=build_run_name, validate_parameters=True)
def ads_build(
    source: str | None = None,
    dataset: str | None = None,
    out: str | None = None,
    format: FormatConfig = FormatConfig(),  # noqa: A002 - the section's name in the config tree
    score: ScoreConfig = ScoreConfig(),
    cluster: ClusterConfig = ClusterConfig(),
    report: ReportConfig = ReportConfig(),
    run: RunConfig = RunConfig(),
) -> dict[str, Any]:
    """Build OUT/final/train.parquet (clustered, difficulty-sorted) from SOURCE, resuming from cached stages.

    The sections are `ads_core.config.BuildConfig`: each field's type, default and help show in the UI.

    Args:
        source: dataset file, directory, s3:// URI or HF id (local cache); default: the bundled GSM8K sample.
        dataset: dataset name (data_source for rows without one, run name, artifact keys); default: from source.
        out: output root, local path or s3://; default: $ADS_OUT_DIR/<dataset>, else ./ads-out/<dataset>.
        format: how SOURCE is read and converted (column overrides, prompt template).
        score: the policy model and the fused embedding + NLL scorer.
        cluster: PCA and K-Means.
        report: the build report.
        run: force_from, Dask, the ads-train hand-off and result storage.
    """
    logger = get_run_logger()
    source = resolve_source(source)
    name = safe_name(dataset or format.name or dataset_name(source))
    cfg = BuildConfig(
        format=format.model_copy(update={"name": name}), score=score, cluster=cluster, report=report, run=run
    )
    ctx = BuildContext(source=source, out=resolve_out(out, name), config=cfg)
    storage.check_writable(ctx.out)  # a missing bucket, bad credentials or a file in the way: one line, now
    logger.info(
        "ads-build %s: %s -> %s (model %s, %d shard(s), k=%d%s)",
        name,
        source,
        ctx.out,
        score.model,
        score.num_shards,
        cluster.num_clusters,
        f", force_from={run.force_from}" if run.force_from else "",
    )
    from prefect.runtime import flow_run

    with owning(ctx.out, f"flow-run:{flow_run.id}") as dead:  # one build at a time per OUT
        if dead:
            mark_crashed(dead)
        try:
            states, seconds, outputs, previous = run_stages(ctx)
        except InputError as exc:  # name the flow parameter to set (format.question_col=...), in one line
            raise InputError(exc.render(flow_spelling), exc.options, original=exc) from None
        final = outputs["sort"]

        train_run, training = None, "not requested (run.trigger_training=never)"
        if run.trigger_training != "never":
            # on_change: one training run per final artifact content; always: one per build run (retries included)
            scope = final["digest"] if run.trigger_training == "on_change" else f"{flow_run.id}:{final['digest']}"
            # model=None: ads-train takes the policy the difficulties were scored with from the final manifest
            train_run = start_training(
                run.train_deployment, final["uri"], None, idempotency_key=f"ads-train:{run.train_deployment}:{scope}"
            )
            training = (
                f"started {run.train_deployment} run {train_run['name']}"
                if train_run["new"]
                else f"not started: the final artifact is unchanged ({run.train_deployment} run "
                f"{train_run['name']} already trains on it)"
            )
        summary = summarize(ctx.out, previous, seconds, states, training)
        publish_refresh(summary.to_dict(), summary.lines(), name)
        for line in summary.lines():
            logger.info("%s", line)
    cached = sum(s == "Cached" for s in states.values())
    logger.info("ads-build %s done: %s (%d of %d stages cached)", name, final["uri"], cached, len(states))
    return {
        "dataset": name,
        "source": source,
        "out": ctx.out,
        "final_uri": final["uri"],
        "formatted_uri": outputs["format"]["uri"],
        "scores_uri": outputs["merge"]["uri"],
        "assignments_uri": outputs["cluster"]["uri"],
        "report_uri": outputs["report"]["uri"],
        "stages": states,
        "train_flow_run_id": train_run["id"] if train_run and train_run["new"] else None,
        "refresh": summary.to_dict(),
        "summary_lines": summary.lines(),
    }
