"""Prefect tasks of the `ads-train` flow: plan the run, run TRL (with a progress artifact and the training plot) or
verl (streaming its log); plus the helpers the flow publishes with.

Errors that mean "fix the input or the machine" (`EXPECTED_ERRORS`) fail a run with one line that names
the flow parameter to change (`dry_run=true`, `verl.n_gpus_per_node`, not `--gpus`); anything else keeps its
traceback.
"""

from __future__ import annotations

import collections
import logging
from datetime import datetime
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.cache_policies import NO_CACHE

from ads_core.config.train import TrainConfig
from ads_core.common.errors import InputError
from ads_core.train import artifact as ta
from ads_core.train import run as trun
from ads_core.train.errors import LaunchError, error_text
from ads_core.train.plan import TrainPlan
from ads_prefect.tasks.handoff import run_name
from ads_prefect.tasks.publish import image_markdown

EXPECTED_ERRORS: tuple[type[Exception], ...] = (ta.ArtifactError, LaunchError, ValueError, InputError)
PLAN_TASK = "plan-training"
RUN_TASK = "run-verl"
RUN_TRL_TASK = "run-trl"
HEADLINE = ("step", "reward_mean", "success_mean", "active_clusters", "window_position", "lag", "loss", "seconds")


def _sections() -> dict[str, str]:
    """Field name -> flow parameter (`n_gpus_per_node` -> `verl.n_gpus_per_node`)."""
    out: dict[str, str] = {}
    for section in ("sampler", "verl", "trl"):
        for name in TrainConfig.model_fields[section].annotation.model_fields:  # type: ignore[union-attr]
            out.setdefault(name, f"{section}.{name}")
    return out


def spell_param(field: str) -> str:
    """How the `ads-train` flow spells a training option: its parameter (`verl.ray_address`), ``dry_run=true``."""
    if field == "dry_run":
        return "dry_run=true"
    if field in TrainConfig.model_fields:
        return field
    return _sections().get(field, field)


def error_line(exc: BaseException) -> str:
    """An expected error as the one line a flow run fails with."""
    return error_text(exc, spell_param)


class _NoTracebackForExpectedErrors(logging.Filter):
    """Prefect logs every failed task run with its traceback; for bad input in our tasks it is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, EXPECTED_ERRORS) and getattr(record, "task_name", None) in (
            PLAN_TASK,
            RUN_TASK,
            RUN_TRL_TASK,
        ):
            record.msg, record.args = f"Task run failed: {error_line(exc)}", ()
            record.exc_info, record.exc_text = None, None
        return True


class _OneLineFailedRun(logging.Filter):
    """A flow that returns a Failed state has said why in its message (and logged any traceback itself); Prefect's
    engine then logs "Engine execution exited with unexpected exception" with a traceback of its own internals.
    That record becomes one line with the run's message."""

    def filter(self, record: logging.LogRecord) -> bool:
        from prefect.exceptions import FailedRun

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, FailedRun):
            record.msg, record.args = f"Run failed: {' '.join(str(exc).split())}", ()
            record.exc_info, record.exc_text = None, None
        return True


def _install_filter() -> None:
    logger = logging.getLogger("prefect.task_runs")
    if not any(isinstance(f, _NoTracebackForExpectedErrors) for f in logger.filters):
        logger.addFilter(_NoTracebackForExpectedErrors())
    for name in ("prefect.flow_runs", "prefect.engine"):
        if not any(isinstance(f, _OneLineFailedRun) for f in logging.getLogger(name).filters):
            logging.getLogger(name).addFilter(_OneLineFailedRun())


_install_filter()


def failure_line(exc: BaseException, limit: int = 300) -> str:
    """A training failure as the one line a flow run's state shows (its traceback goes to the log)."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return f"training failed: {text if len(text) <= limit else text[: limit - 3] + '...'} (traceback in the log)"


def train_run_name(artifact_uri: str, now: datetime) -> str:
    """``train-<dataset>-<UTC time>``: the dataset from the artifact's manifest, else its folders."""
    try:
        manifest = ta.read_manifest(artifact_uri) if artifact_uri else None
    except Exception:  # noqa: BLE001 - a run name must never fail the run (unreachable storage, odd URI)
        manifest = None
    return run_name(ta.dataset_of(artifact_uri, manifest), now)


def artifact_key(experiment: str, what: str) -> str:
    """Prefect artifact keys: lowercase letters, digits and dashes."""
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in f"ads-train-{experiment}-{what}".lower())
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug.strip("-")


def config_markdown(plan: TrainPlan, dry_run: bool) -> str:
    """The plan (trainer and why, sizes, paths), the warnings and the trainer's own part, as markdown."""
    s = plan.summary()
    rows = "\n".join(f"| {k} | `{v}` |" for k, v in s.items() if k not in ("warnings", "val_files"))
    evals = "".join(f"\n  - `{n}`: `{u}`" for n, u in plan.eval_uris.items()) or " none"
    warns = "".join(f"\n- {w}" for w in plan.warnings_for(spell_param)) or "\n- none"
    decon = ""
    if plan.decontamination is not None:
        d = plan.decontamination
        decon = f"\n\n**Decontamination:** {d['contaminated']} of {d['train_rows']} training rows match {d['matches']}"
    part = plan.part.describe() if plan.part is not None else ""
    return (
        f"# ads-train {'dry run' if dry_run else 'run'} ({plan.trainer}): `{plan.artifact.uri}`\n\n"
        f"| setting | value |\n|---|---|\n{rows}\n\n**Eval sets:**{evals}\n\n**Warnings:**{warns}{decon}\n\n{part}"
    )


@task(name=PLAN_TASK, cache_policy=NO_CACHE, retries=0)
def prepare_training(artifact_uri: str, cfg: TrainConfig, dry_run: bool) -> TrainPlan:
    """Pick the trainer, check the artifact and the machine, plan the run (verl: compose and validate its config)."""
    return trun.prepare(artifact_uri, cfg, dry_run=dry_run)


@task(name=RUN_TASK, cache_policy=NO_CACHE, retries=0)
def run_verl(plan: TrainPlan) -> dict[str, float]:
    """Run verl, streaming its output into this run's log; the last step's metrics."""
    from ads_core.train.verl import launch as verl_launch

    logger = get_run_logger()
    console_steps: collections.deque[str] = collections.deque(maxlen=1)

    def on_line(line: str) -> None:
        if verl_launch.parse_console_metrics(line) is not None:
            console_steps.append(line)
        logger.info(line)

    part = trun.verl_part(plan)
    logger.info("launching (%s): %s", part.mode, part.command_line)
    code = verl_launch.launch(part, on_line=on_line)
    if code != 0:
        raise LaunchError(
            f"verl exited with status {code}; its output is in this run's log above (run dir {plan.run_dir})"
        )
    return verl_launch.final_metrics(part, list(console_steps))


def publish_verl_metrics(plan: TrainPlan, metrics: dict[str, float]) -> None:
    from ads_core.train.verl.launch import headline

    table = [{"metric": k, "value": v} for k, v in sorted(headline(metrics).items())]
    if table:
        create_table_artifact(
            key=artifact_key(plan.experiment, "metrics"), table=table, description=f"last step of {plan.experiment}"
        )


@task(name=RUN_TRL_TASK, cache_policy=NO_CACHE, retries=0)
def run_trl(plan: TrainPlan) -> trun.TrainResult:
    """Train with TRL in this run: a progress artifact per step, then the training plot and the last step."""
    from ads_core.train.trl.steps import plot_steps

    logger = get_run_logger()
    total = plan.config.steps
    progress = create_progress_artifact(
        progress=0.0,
        key=artifact_key(plan.experiment, "progress"),
        description=f"GRPO steps of {plan.experiment} ({plan.prompts_per_step} prompts each, of {total})",
    )

    def on_step(record: dict[str, Any], trainer: Any) -> None:
        update_progress_artifact(artifact_id=progress, progress=min(100.0, 100.0 * record["step"] / total))
        logger.info(
            "step %d/%d: reward %.3f, success %.3f, %d clusters, lag %d, loss %s",
            record["step"],
            total,
            record["reward_mean"],
            record["success_mean"],
            record["active_clusters"],
            record["lag"],
            record.get("loss"),
        )

    logger.info("TRL: %s", plan.part.describe().strip() if plan.part else "")
    result = trun.execute(plan, on_step=on_step)
    update_progress_artifact(artifact_id=progress, progress=100.0)
    for note in result.notes:
        logger.info(note)
    if result.steps:
        png = plot_steps(result.steps, title=f"{plan.experiment}: {plan.sampler.kind} sampler")
        create_markdown_artifact(
            key=artifact_key(plan.experiment, "training"),
            markdown=f"# {plan.experiment}: training\n\n{image_markdown(png, 'reward and clusters per step')}\n\n"
            f"Steps: `{result.steps_file}`; checkpoint: `{result.last_checkpoint}`",
            description="reward per step; each cluster's success and window position",
        )
        table = [{"metric": k, "value": result.metrics[k]} for k in HEADLINE if k in result.metrics]
        create_table_artifact(
            key=artifact_key(plan.experiment, "metrics"), table=table, description=f"last step of {plan.experiment}"
        )
    return result
