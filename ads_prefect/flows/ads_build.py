"""The `ads-build` flow: the declared stages (`ads_core.pipeline.stages.STAGES`), each through the one generic
cached task, each followed by the UI items it declares. No stage is named here: a stage added to the list
runs in this flow as it does in the in-process `build()`.

Every stage is keyed on input content (`ads_core.pipeline.keys.stage_key`), so rerunning a failed or finished
build resumes from the stages whose inputs did not change. `run.force_from=<stage>` recomputes that stage and
everything after it. A cached stage whose artifact has vanished or was overwritten is recomputed
(`ads_prefect.tasks.stage_task.checked`). A sharded stage runs in-process by default, or on Dask
(`dask="local"`, `"local-cuda"` for one worker per GPU, or a scheduler address), with its declared resources
as Dask worker resources. Builds into one OUT run one at a time (`ads_prefect.tasks.locks.owning`), and a build
that lost its lock on OUT (paused past its lease, then taken over) publishes nothing more.

With `run.trigger_training=on_change` (or `always`), the finished build starts the `ads-train` deployment with
the final artifact's URI (labelled with this run, linked from its summary), until a training run on that content
has completed (a failed one is retried up to `run.train_retries` times; `ads_prefect.tasks.handoff`). Every build
ends with a refresh summary.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from functools import partial
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.futures import as_completed

from ads_core import storage
from ads_core.config.build import BuildConfig, ClusterConfig, FormatConfig, ReportConfig, RunConfig, ScoreConfig
from ads_core.common.errors import InputError
from ads_core.pipeline import lifecycle
from ads_core.pipeline import stages as declared
from ads_core.pipeline.keys import outputs_digest, stage_key
from ads_core.pipeline.refresh import row_identities, summarize
from ads_core.pipeline.resolve import resolve, resolve_name, resolve_source
from ads_core.pipeline.stages import context, stages_from
from ads_core.stages.base import Stage, StageContext
from ads_core.storage import manifest as mf
from ads_core.storage.errors import StorageError
from ads_prefect.flows.cluster import api_pinned, check_scheduler, dask_annotations, prepare_workers, shard_runner
from ads_prefect.flows.env import BUILD_TIMEOUT_ENV, BUILD_TIMEOUT_S, flow_timeout
from ads_prefect.tasks.base import StageOutput, artifact_key, intact
from ads_prefect.tasks.handoff import run_url, start_training
from ads_prefect.tasks.locks import owning
from ads_prefect.tasks.publish import publish_build, publish_refresh, publish_stage
from ads_prefect.tasks.stage_task import checked, configured, flow_spelling, params_of

BUILD_RUN_NAME = re.compile(r"build-[A-Za-z0-9._-]+-\d{8}-\d{6}")


def build_run_name() -> str:
    """Flow run name: build-<dataset>-<UTC time>; a run that already has such a name (a retry) keeps it."""
    from prefect.runtime import flow_run

    if BUILD_RUN_NAME.fullmatch(str(flow_run.name or "")):
        return str(flow_run.name)
    params = flow_run.parameters or {}
    fmt = params.get("format")
    given = fmt.get("name") if isinstance(fmt, dict) else getattr(fmt, "name", None)
    try:
        name = resolve_name(resolve_source(params.get("source")), params.get("dataset"), given)
    except (ValueError, StorageError):  # a bad name or source fails the run with its own message; it needs a name
        name = "dataset"
    return f"build-{name}-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}"


def progress_artifact(stage: Stage, ctx: StageContext) -> str | None:
    """A progress artifact for a stage that declares progress (its runs update it as rows go by)."""
    if not stage.progress:
        return None
    n = len(stage.shards(ctx))
    return str(
        create_progress_artifact(
            progress=0.0,
            key=artifact_key(ctx.dataset, f"{stage.name}-progress"),
            description=f"{stage.name}: {n} run(s) into {ctx.stage_dir(stage.main, 0 if stage.sharded else None)}",
        )
    )


def run_stage_runs(
    stage: Stage, ctx: StageContext, refresh: bool, states: dict[str, str], fence: dict[str, Any] | None = None
) -> StageOutput:
    """Every run of one stage (one per shard of a sharded stage): in this thread one after another (the set-up
    state is made once, and Ctrl-C / SIGTERM reach the computing stage), or mapped on Dask. Returns the
    record of the stage's main output (the last shard's for a sharded stage). Each run publishes only while
    `fence` (the build's hold on OUT) is still the newest."""
    logger = get_run_logger()
    shards = stage.shards(ctx)
    artifact = progress_artifact(stage, ctx)
    rs = ctx.config.run.result_storage
    keys = {shard: stage_key(stage, ctx, shard) for shard in shards}  # once: it hashes the inputs
    failures: list[tuple[int | None, Any]] = []
    outputs: dict[int | None, StageOutput] = {}
    cached = 0

    def params(shard: int | None, fresh: bool) -> dict[str, Any]:
        return params_of(stage, ctx, shard, keys[shard], reuse=not fresh, progress_artifact=artifact, fence=fence)

    def record(done: int, shard: int | None, state: Any, recompute: Any) -> None:
        nonlocal cached
        if state.is_completed():
            trusted = partial(intact, stage=stage, ctx=ctx, shard=shard, key=keys[shard])
            outputs[shard], state = checked(state, recompute, stage.label(shard), trusted)
            cached += state.name == "Cached"
        else:
            failures.append((shard, state))
        states[stage.label(shard)] = str(state.name)
        if artifact and len(shards) > 1:
            description = f"{done}/{len(shards)} runs finished ({cached} cached, {len(failures)} failed)"
            update_progress_artifact(artifact_id=artifact, progress=100.0 * done / len(shards), description=description)
        elif artifact and state.is_completed():  # a computed run keeps its own last line (rows, rate)
            description = f"{stage.name}: reused (Cached)" if state.name == "Cached" else None
            update_progress_artifact(artifact_id=artifact, progress=100.0, description=description)

    if not (stage.sharded and ctx.config.run.dask):
        for done, shard in enumerate(shards, start=1):
            state = configured(stage, shard, refresh, rs)(**params(shard, refresh), return_state=True)
            record(
                done, shard, state, lambda s=shard: configured(stage, s, True, rs)(**params(s, True), return_state=True)
            )
    else:
        dask = ctx.config.run.dask
        check_scheduler(dask)  # an unreachable scheduler: one line naming run.dask, not a 30 s hang and a traceback
        with api_pinned(), shard_runner(dask, ctx.config.run.dask_workers, len(shards)) as runner:
            prepare_workers(runner, dask)

            def recompute(shard: int | None) -> Any:
                with dask_annotations(stage, runner):
                    retry = runner.submit(configured(stage, shard, True, rs), parameters=params(shard, True))
                retry.wait()
                return retry.state

            with dask_annotations(stage, runner):
                futures = {
                    runner.submit(configured(stage, s, refresh, rs), parameters=params(s, refresh)): s for s in shards
                }
            for done, future in enumerate(as_completed(list(futures)), start=1):
                shard = futures[future]
                future.wait()  # sets the future's final state
                record(done, shard, future.state, lambda s=shard: recompute(s))
    if failures:
        logger.error("%d of %d runs of %s failed: %s", len(failures), len(shards), stage.name, [s for s, _ in failures])
        failures[0][1].result()  # raises that run's exception
    return outputs[shards[-1]]


def run_stages(
    ctx: StageContext, fence: dict[str, Any] | None = None
) -> tuple[dict[str, str], dict[str, float], dict[str, StageOutput], Any]:
    """Every declared stage in order, each followed by the UI items it declares; no stage is special here."""
    force = stages_from(ctx.config.run.force_from)
    states: dict[str, str] = {}
    seconds: dict[str, float] = {}
    outputs: dict[str, StageOutput] = {}
    previous = row_identities(ctx.uri("final"))  # before this build replaces it
    config = ctx.config.model_dump()
    for stage in declared.STAGES:  # read at call time: a stage added to the list runs with no other edit
        t0 = time.perf_counter()
        try:
            outputs[stage.name] = run_stage_runs(stage, ctx, stage.name in force, states, fence)
        finally:
            lifecycle.teardown(stage)  # the set-up state of runs in this process (the model) is not needed again
        seconds[stage.name] = time.perf_counter() - t0
        if stage.ui is not None:
            publish_stage(stage.name, outputs[stage.name]["uri"], ctx.source, ctx.out, ctx.dataset, config)
    publish_build(ctx.uri("final"), ctx.dataset, dict(states))
    return states, seconds, outputs, previous


def mark_crashed(dead: dict[str, Any]) -> None:
    """A build killed (or paused past its lease) while it held this OUT left its flow run Running: mark it
    Crashed. A paused one that wakes up publishes nothing (its fence is stale) and ends Failed with its own line."""
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
                why = str(dead.get("stale_reason") or "its process died")
                message = f"a later build took over its output folder: {why}"
                client.set_flow_run_state(run_id, Crashed(message=message), force=True)
                logger = get_run_logger()
                logger.warning("flow run %s (%s) was left Running (%s): marked Crashed", run.name, run_id, why)
    except Exception as exc:  # noqa: BLE001 - another server, or the run is gone: nothing to mark
        get_run_logger().info("could not mark the earlier flow run %s Crashed: %s", run_id, exc)


@flow(
    name="ads-build",
    flow_run_name=build_run_name,
    validate_parameters=True,
    timeout_seconds=flow_timeout(BUILD_TIMEOUT_ENV, BUILD_TIMEOUT_S),  # ADS_BUILD_TIMEOUT_S, default 24 h
)
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
        out: output root, local path or s3://; default: $ADS_OUT_DIR/{dataset}, else ./ads-out/{dataset}.
        format: how SOURCE is read and converted (column overrides, prompt template).
        score: the policy model and the fused embedding + NLL scorer.
        cluster: PCA and K-Means.
        report: the build report.
        run: force_from, Dask, the ads-train hand-off and result storage.
    """
    logger = get_run_logger()
    target = resolve(source, out, dataset, format.name)
    cfg = BuildConfig(format=format, score=score, cluster=cluster, report=report, run=run)
    ctx = context(target, cfg)
    name = target.dataset
    storage.check_writable(ctx.out)  # a missing bucket, bad credentials or a file in the way: one line, now
    logger.info(
        "ads-build %s: %s -> %s (model %s, %d shard(s), k=%d%s)",
        name,
        ctx.source,
        ctx.out,
        score.model,
        score.num_shards,
        cluster.num_clusters,
        f", force_from={run.force_from}" if run.force_from != "none" else "",
    )
    from prefect.runtime import flow_run

    with owning(ctx.out, f"flow-run:{flow_run.id}") as held:  # one build at a time per OUT, publishes fenced
        if held.taken_over:
            mark_crashed(held.taken_over)
        try:
            states, seconds, outputs, previous = run_stages(ctx, held.fence.to_dict())
        except InputError as exc:  # name the flow parameter to set (format.question_col=...), in one line
            raise InputError(exc.render(flow_spelling), exc.options, original=exc) from None
        final = {"uri": ctx.uri("final"), "digest": outputs_digest(mf.read(ctx.stage_dir("final")))}

        train_run, training = None, "not requested (run.trigger_training=never)"
        if run.trigger_training != "never":
            # on_change: until a training run on this final artifact's content completed (a failed one is retried
            # up to run.train_retries times); always: one per build run. See ads_prefect.tasks.handoff.
            train_run = start_training(
                run.train_deployment,
                final["uri"],
                name,
                final["digest"],
                run.trigger_training,
                run.train_retries,
                str(flow_run.id),
                str(flow_run.name),
            )
            training = train_run["line"]
        summary = summarize(ctx, previous, seconds, states, training)
        train_page = run_url(train_run["id"]) if train_run else None
        links = {f"{run.train_deployment} run {train_run['name']}": train_page} if train_page else {}
        publish_refresh(summary.to_dict(), summary.lines(), name, links)
        for line in summary.lines():
            logger.info("%s", line)
    cached = sum(s == "Cached" for s in states.values())
    logger.info(
        "ads-build %s done (run %s): %s (%d of %d stages cached)",
        name,
        flow_run.name,
        final["uri"],
        cached,
        len(states),
    )
    return {
        "dataset": name,
        "source": ctx.source,
        "out": ctx.out,
        "final_uri": final["uri"],
        "outputs": {stage: output["uri"] for stage, output in outputs.items()},
        "stages": states,
        "train_flow_run_id": train_run["id"] if train_run and train_run["new"] else None,
        "flow_run": {"id": str(flow_run.id), "name": str(flow_run.name)},
        "refresh": summary.to_dict(),
        "summary_lines": summary.lines(),
    }
