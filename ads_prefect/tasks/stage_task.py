"""The one Prefect task wrapper for every declared stage (`ads_core.pipeline.stages.STAGES`).

It adds what the library leaves out: reuse of a stage whose manifest in OUT records this stage key (version,
config section and input content, never paths or run ids; `ads_core.pipeline.stage_keys.reusable`), shown in the
UI as a final state named `Cached`; retries of transient errors; the stage's set-up state and resources; one log
line per stage (one line without a traceback for input errors); and the progress artifact of a stage that
declares progress. The flow computes each stage key once and passes it in.

The manifest is the build's one cache: the task has no Prefect cache policy and persists no result, so whether a
stage is done is decided in one place, from OUT alone, on any machine and whatever Prefect's database holds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.states import Completed, State

from ads_core.common.progress import working_on
from ads_core.config.build import BuildConfig
from ads_core.locks.fence import fenced, stopping_when_lost
from ads_core.pipeline import lifecycle
from ads_core.pipeline.stage_keys import reusable, run_stage
from ads_core.pipeline.stages import stage_context, stages_by_name
from ads_core.stages.base import Stage, StageContext
from ads_core.storage import manifest as mf
from ads_prefect.runtime.progress import progress
from ads_prefect.tasks.faults import fault_point, pause_point, pausing_at_progress
from ads_prefect.tasks.retries import default_retries, expected_errors, retry_delays, retry_if_transient

log = logging.getLogger("ads.tasks")


def flow_spelling(field: str) -> str:
    """How a flow parameter is named in a message: `question_col` -> `format.question_col=`."""
    for section, model in BuildConfig.model_fields.items():
        annotation = model.annotation
        if isinstance(annotation, type) and field in getattr(annotation, "model_fields", {}):
            return f"{section}.{field}="
    return f"{field}="


class _OneLineForExpectedErrors(logging.Filter):
    """Prefect logs failed runs with their traceback; for bad input that is noise, the message is enough."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and isinstance(exc, expected_errors()):
            text = exc.render(flow_spelling) if hasattr(exc, "render") else str(exc)
            record.msg, record.args = f"Run failed: {type(exc).__name__}: {text}", ()
            record.exc_info, record.exc_text = None, None
        return True


def install_log_filters() -> None:
    """Failed stage runs with bad input log one line (idempotent). Applied by each flow when it starts
    (`ads_prefect.flows.setup`) and by each stage run (a Dask worker runs no flow), never at import."""
    for name in ("prefect.task_runs", "prefect.flow_runs"):
        if not any(isinstance(f, _OneLineForExpectedErrors) for f in logging.getLogger(name).filters):
            logging.getLogger(name).addFilter(_OneLineForExpectedErrors())


def context_of(params: dict[str, Any]) -> StageContext:
    config = BuildConfig.model_validate(params["config"])
    return stage_context(params["source"], params["out"], params["dataset"], config)


def summary(manifest: mf.Manifest) -> str:
    """One log line from a manifest's counts (and the few extras people look for)."""
    counts = ", ".join(f"{k} {v}" for k, v in manifest.counts.items() if isinstance(v, int | float))
    extra = manifest.extra or {}
    more = [f"{k} {extra[k]}" for k in ("backend", "layout") if k in extra and isinstance(extra[k], str)]
    if isinstance(extra.get("tokens_per_s"), int | float):
        more.append(f"{extra['tokens_per_s']:.0f} tokens/s")
    return "; ".join(p for p in (counts, ", ".join(more)) if p)


@task(
    cache_policy=NO_CACHE,  # the manifest decides (see the module's docstring)
    persist_result=False,
    retries=default_retries(),
    retry_delay_seconds=retry_delays(),
    retry_jitter_factor=0.2,
    retry_condition_fn=retry_if_transient,
)
def stage_task(
    stage_name: str,
    source: str,
    out: str,
    dataset: str,
    config: dict[str, Any],
    key: str,
    shard: int | None = None,
    reuse: bool = True,
    progress_artifact: str | None = None,
    fence: dict[str, Any] | None = None,
) -> str | State:
    """Run one declared stage (one shard of a sharded stage) and return the URI of its main output.

    When REUSE and the stage's manifest in OUT records this very stage key and checks out (`reusable`), the stage
    is not run: the task run ends in a Completed state named `Cached` whose message is the manifest's summary.

    `fence` is the build's hold on OUT (`locks.Fence`): every write of the run is checked against it right
    before it is published, here or on a Dask worker, and a build that lost its lock publishes nothing.
    """
    install_log_filters()  # on a Dask worker this is the first of our code that runs
    stage = stages_by_name()[stage_name]
    ctx = context_of({"source": source, "out": out, "dataset": dataset, "config": config})
    uri = stage.main_uri(ctx, shard)
    found = reusable(stage, ctx, shard, key) if reuse else None
    if found is not None:
        get_run_logger().info("%s: reusing %s (its manifest records this stage key)", stage.label(shard), uri)
        return cached(found, uri)
    fault_point(stage_name)
    with fenced(fence):  # checked now (a build that lost its lock starts nothing) and before every publish
        pause_point(stage_name)
        shown = progress if progress_artifact is None else with_artifact(progress_artifact, stage, ctx, shard)
        ctx.progress = pausing_at_progress(stopping_when_lost(shown, fence), stage_name)
        ctx.state = lifecycle.state_for(stage, ctx)
        with lifecycle.resources(stage), working_on(stage.label(shard)):  # what the heartbeat names meanwhile
            manifest = run_stage(stage, ctx, shard, key)
    get_run_logger().info("%s: %s -> %s", stage.label(shard), summary(manifest), uri)
    return uri


def cached(manifest: mf.Manifest, uri: str) -> State:
    """The final state of a reused stage run: what the UI shows as `Cached`, with the manifest's summary."""
    return Completed(
        name="Cached", data=uri, message=f"reused: {summary(manifest) or 'its manifest records this stage key'}"
    )


def with_artifact(
    artifact_id: str,
    stage: Stage,
    ctx: StageContext,
    shard: int | None,
    every_s: float = 2.0,
    log_every_s: float = 15.0,
) -> Any:
    """A progress factory that drives the CLI bar (if any), updates a Prefect progress artifact every few seconds
    (done, rate and ETA) so the UI moves during a run, and logs a line when a phase starts and then every
    `log_every_s` (`model: building the tiny model: training 40/100 steps, 2.1 steps/s, ETA 29 s`).

    The rate is measured from the first update on: the time before it (loading a model, rows found in the cache,
    the first batch's warm-up) is not work the rest of the run repeats, and counting it made the first ETA wildly
    long. So the ETA shows once a second update gives a measured rate."""
    from prefect.artifacts import update_progress_artifact

    parts = len(stage.shards(ctx))
    index = shard or 0
    where = f"{stage.label(shard)} ({index + 1}/{parts})" if parts > 1 else stage.name
    logger = get_run_logger()
    reached = [0.0]  # the run's share done so far: a later phase without a total (a final check) keeps it

    def publish(line: str, share: float) -> None:
        reached[0] = share = max(share, reached[0])
        try:
            update_progress_artifact(
                artifact_id=artifact_id, progress=100.0 * (index + share) / parts, description=line
            )
        except Exception as exc:  # noqa: BLE001 - the UI missing an update never fails a build
            log.debug("progress artifact update failed: %s", exc)

    @contextmanager
    def factory(description: str, total: int | None, unit: str = "rows") -> Iterator[Callable[[int], None]]:
        done, first_at, first_done, last, logged = 0, None, 0, 0.0, time.monotonic()
        logger.info("%s: %s%s", where, description, f" ({total} {unit})" if total else "...")
        publish(f"{where}: {description}...", 0.0)
        with progress(description, total, unit) as bar:

            def text(now: float) -> tuple[str, float]:
                rate = (done - first_done) / (now - first_at) if first_at is not None and now > first_at else 0.0
                speed = f", {rate:.1f} {unit}/s" if rate > 0 else ""
                if total:
                    eta = f", ETA {(total - done) / rate:.0f} s" if rate > 0 else ""
                    return f"{where}: {description} {done}/{total} {unit}{speed}{eta}", done / total
                return f"{where}: {description} {done} {unit}{speed}", 0.0

            def advance(n: int) -> None:
                nonlocal done, first_at, first_done, last, logged
                if bar:
                    bar(n)
                done += n
                now = time.monotonic()
                if first_at is None:
                    first_at, first_done = now, done
                finished = bool(total and done >= total)
                if now - logged >= log_every_s or finished:
                    logged = now
                    logger.info("%s", text(now)[0])
                if now - last < every_s and not finished:
                    return
                last = now
                publish(*text(now))

            yield advance

    return factory


def configured(stage: Stage, shard: int | None) -> Any:
    """The stage task named for this run (`score-shard-1`), with the retry delays read now (tests shorten them)."""
    return stage_task.with_options(
        name=stage.name, task_run_name=stage.label(shard), retry_delay_seconds=retry_delays()
    )


def params_of(
    stage: Stage,
    ctx: StageContext,
    shard: int | None,
    key: str,
    reuse: bool = True,
    progress_artifact: str | None = None,
    fence: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "stage_name": stage.name,
        "source": ctx.source,
        "out": ctx.out,
        "dataset": ctx.dataset,
        "config": ctx.config.model_dump(),
        "key": key,
        "shard": shard,
        "reuse": reuse,
        "progress_artifact": progress_artifact,
        "fence": fence,
    }
