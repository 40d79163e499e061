"""The `ads-build` flow: the Prefect executor (`ads_prefect.flows.stage_runs`) of the declared stages
(`ads_core.pipeline.stages.STAGES`): each through the one generic stage task, each followed by the UI items it
declares. No stage is named here: a stage added to the list runs in this flow as it does in the in-process
`build()`.

Every stage is keyed on input content (`ads_core.pipeline.stage_keys.stage_key`) and stamps its key into its
manifest, so rerunning a failed or finished build resumes from the stages whose manifest in OUT records the key
this build computes and checks out; those end `Cached` in the UI. `run.force_from=<stage>` recomputes that stage
and everything after it. A stage whose artifact has vanished or was overwritten is recomputed
(`ads_core.pipeline.stage_keys.reusable`). A sharded stage runs in-process by default, or on Dask
(`dask="local"`, `"local-cuda"` for one worker per GPU, or a scheduler address), with its declared resources
as Dask worker resources. Builds into one OUT run one at a time (`ads_core.locks.manager.owning`), and a build
that lost its lock on OUT (paused past its lease, then taken over) publishes nothing more.

With `run.trigger_training=on_change` (or `always`), the finished build starts the `ads-train` deployment with
the final artifact's URI (labelled with this run, linked from its summary), until a training run on that content
has completed (a failed one is retried up to `run.train_retries` times; `ads_prefect.tasks.handoff`). Every build
ends with a refresh summary.
"""

from __future__ import annotations

import datetime as dt
import inspect
import re
from typing import Any

from prefect import get_run_logger

from ads_core import storage
from ads_core.common.errors import InputError
from ads_core.config.build import BuildConfig
from ads_core.locks.manager import owning
from ads_core.pipeline import stages as declared
from ads_core.pipeline.executor import execute
from ads_core.pipeline.refresh import row_identities, summarize
from ads_core.pipeline.resolve import resolve, resolve_name, resolve_source
from ads_core.pipeline.stage_keys import outputs_digest
from ads_core.pipeline.stages import context
from ads_core.stages.base import StageContext
from ads_core.storage import manifest as mf
from ads_core.storage.errors import StorageError
from ads_prefect.flows.params import with_config_parameters
from ads_prefect.flows.setup import flow, prepare_process
from ads_prefect.flows.stage_runs import PrefectExecutor
from ads_prefect.runtime.prefect_env import BUILD_TIMEOUT_ENV, BUILD_TIMEOUT_S, flow_timeout
from ads_prefect.runtime.runs import mark_crashed, run_url
from ads_prefect.tasks.handoff import start_training
from ads_prefect.tasks.publish import publish_build, publish_refresh
from ads_prefect.tasks.stage_task import flow_spelling

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


def run_stages(ctx: StageContext, fence: dict[str, Any] | None = None) -> tuple[PrefectExecutor, Any]:
    """Every declared stage through the Prefect executor, then the build's UI summary of the final artifact."""
    previous = row_identities(ctx.uri("final"))  # before this build replaces it
    executor = PrefectExecutor(fence)
    execute(executor, ctx)
    publish_build(ctx.uri("final"), ctx.dataset, dict(executor.states))
    return executor, previous


def mark_taken_over(dead: dict[str, Any]) -> None:
    """A build killed (or paused past its lease) while it held this OUT left its flow run Running: mark it
    Crashed. A paused one that wakes up publishes nothing (its fence is stale) and ends Failed with its own line."""
    holder = str(dead.get("holder", ""))
    if not holder.startswith("flow-run:"):
        return
    run_id = holder.removeprefix("flow-run:")
    why = str(dead.get("stale_reason") or "its process died")
    try:
        name = mark_crashed(run_id, f"a later build took over its output folder: {why}")
    except Exception as exc:  # noqa: BLE001 - another server, or the run is gone: nothing to mark
        get_run_logger().info("could not mark the earlier flow run %s Crashed: %s", run_id, exc)
        return
    if name is not None:
        get_run_logger().warning("flow run %s (%s) was left Running (%s): marked Crashed", name, run_id, why)


def ads_build(
    source: str | None = None, dataset: str | None = None, out: str | None = None, **sections: Any
) -> dict[str, Any]:
    """Build OUT/final/train.parquet (clustered, difficulty-sorted) from SOURCE, resuming from cached stages.

    The parameters after `out` are the sections of `ads_core.config.build.BuildConfig`, generated from it
    (`ads_prefect.flows.params`): each a typed parameter whose fields show their type, default and help."""
    prepare_process()
    cfg = BuildConfig(**sections)
    run = cfg.run
    logger = get_run_logger()
    target = resolve(source, out, dataset, cfg.format.name)
    ctx = context(target, cfg)
    name = target.dataset
    storage.check_writable(ctx.out)  # a missing bucket, bad credentials or a file in the way: one line, now
    runs = ", ".join(f"{s.name} x{len(s.shards(ctx))}" if s.sharded else s.name for s in declared.STAGES)
    forced = f", force_from={run.force_from}" if run.force_from != "none" else ""
    logger.info("ads-build %s: %s -> %s (%s%s)", name, ctx.source, ctx.out, runs, forced)
    from prefect.runtime import flow_run

    with owning(ctx.out, f"flow-run:{flow_run.id}") as held:  # one build at a time per OUT, publishes fenced
        if held.taken_over:
            mark_taken_over(held.taken_over)
        try:
            executor, previous = run_stages(ctx, held.fence.to_dict())
            states, seconds, outputs = executor.states, executor.seconds, executor.outputs
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
        "outputs": dict(outputs),
        "stages": states,
        "train_flow_run_id": train_run["id"] if train_run and train_run["new"] else None,
        "flow_run": {"id": str(flow_run.id), "name": str(flow_run.name)},
        "refresh": summary.to_dict(),
        "summary_lines": summary.lines(),
    }


ads_build = flow(
    name="ads-build",
    flow_run_name=build_run_name,
    validate_parameters=True,
    timeout_seconds=flow_timeout(BUILD_TIMEOUT_ENV, BUILD_TIMEOUT_S),  # ADS_BUILD_TIMEOUT_S, default 24 h
)(
    with_config_parameters(
        ads_build,
        BuildConfig,
        leading=[
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=str | None)
            for name in ("source", "dataset", "out")
        ],
        docs={
            "source": "dataset file, directory, s3:// URI or HF id (local cache); default: the bundled GSM8K sample.",
            "dataset": "dataset name (data_source for rows without one, run name, artifact keys); default: from "
            "source.",
            "out": "output root, local path or s3://; default: $ADS_OUT_DIR/{dataset}, else ./ads-out/{dataset}.",
        },
    )
)
