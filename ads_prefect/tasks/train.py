"""Prefect tasks of the `ads-train` flow: plan the run, run its trainer (a progress artifact and the training plot
for a trainer that reports its steps, its log streamed for one that runs as a subprocess); plus the helpers the
flow publishes with.

Errors that mean "fix the input or the machine" (`EXPECTED_ERRORS`) fail a run with one line that names
the flow parameter to change (`dry_run=true`, `verl.n_gpus_per_node`, not `--gpus`); anything else keeps its
traceback.
"""

from __future__ import annotations

import logging
import os
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

from ads_core.common.errors import InputError, render_options
from ads_core.train import artifact as ta
from ads_core.train import run as trun
from ads_core.train.errors import LaunchError, RunStateError, error_text
from ads_core.train.options import TrainConfig
from ads_core.train.plan import TrainPlan
from ads_prefect.tasks.artifact_keys import train_artifact_key as artifact_key
from ads_prefect.tasks.handoff import run_name
from ads_prefect.tasks.publish import image_markdown

EXPECTED_ERRORS: tuple[type[Exception], ...] = (ta.ArtifactError, LaunchError, ValueError, InputError, RunStateError)
PLAN_TASK = "plan-training"
RUN_TASK = "run-training"  # run as `run-<trainer>` (run-trl, run-verl)


def _sections() -> dict[str, str]:
    """Field name -> flow parameter (`n_gpus_per_node` -> `verl.n_gpus_per_node`)."""
    out: dict[str, str] = {}
    for section in TrainConfig.sections():
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
        name = str(getattr(record, "task_name", None) or "")
        if isinstance(exc, EXPECTED_ERRORS) and (name == PLAN_TASK or name.startswith("run-")):
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


def install_log_filters() -> None:
    """Failed training runs log one line (idempotent); applied by the flows when they start
    (`ads_prefect.flows.setup`), never at import."""
    logger = logging.getLogger("prefect.task_runs")
    if not any(isinstance(f, _NoTracebackForExpectedErrors) for f in logger.filters):
        logger.addFilter(_NoTracebackForExpectedErrors())
    for name in ("prefect.flow_runs", "prefect.engine"):
        if not any(isinstance(f, _OneLineFailedRun) for f in logging.getLogger(name).filters):
            logging.getLogger(name).addFilter(_OneLineFailedRun())


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


def run_training(plan: TrainPlan) -> trun.TrainResult:
    """Run the plan's trainer as task `run-<trainer>`."""
    return _run_training.with_options(name=f"run-{plan.trainer}")(plan)


@task(name=RUN_TASK, cache_policy=NO_CACHE, retries=0)
def _run_training(plan: TrainPlan) -> trun.TrainResult:
    """Train: a progress artifact per step (trainers that report steps) or the trainer's output streamed into
    this run's log (trainers that run as a subprocess); then the training plot and the last step's numbers."""
    from ads_core.evaluation.compare_report import validation_report
    from ads_core.evaluation.evallog import EVAL_FILE, read_evals
    from ads_core.train.step_plot import plot_steps

    logger = get_run_logger()
    total = plan.config.steps
    progress = None
    if trun.trainer_of(plan).streams_steps:
        progress = create_progress_artifact(
            progress=0.0,
            key=artifact_key(plan.experiment, "progress"),
            description=f"GRPO steps of {plan.experiment} ({plan.prompts_per_step} prompts each, of {total})",
        )

    def on_step(record: dict[str, Any], trainer: Any) -> None:
        if progress is not None:
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
        for note in record.get("notes", []):  # e.g. a dynamic-sampling step that rolled out several batches
            logger.info(note)
        for warning in record.get("warnings", []):  # e.g. no learning signal: the log, an artifact, the state
            warnings.append(render_options(warning, record.get("warning_options", ()), spell_param))
            logger.warning(warnings[-1])

    warnings: list[str] = []
    logger.info("%s: %s", plan.trainer, plan.part.launch_line() if plan.part else "")
    result = trun.execute(plan, on_step=on_step, on_line=logger.info)
    result.warnings = [*result.warnings, *(w for w in warnings if w not in result.warnings)]
    if result.warnings:  # seen in the UI beside the run's plots, not only in its log
        create_markdown_artifact(
            key=artifact_key(plan.experiment, "warnings"),
            markdown=f"# {plan.experiment}: warnings\n\n" + "\n".join(f"- {w}" for w in result.warnings),
            description=f"what the training of {plan.experiment} warned about (e.g. no learning signal)",
        )
    if progress is not None:
        update_progress_artifact(artifact_id=progress, progress=100.0)
    for note in result.notes:
        logger.info(note)
    if result.steps:
        evals = read_evals(os.path.join(plan.run_dir, EVAL_FILE))  # validation accuracy on the reward panel
        png = plot_steps(result.steps, title=f"{plan.experiment}: {plan.sampler.kind} sampler", evals=evals)
        create_markdown_artifact(
            key=artifact_key(plan.experiment, "training"),
            markdown=f"# {plan.experiment}: training\n\n{image_markdown(png, 'reward and clusters per step')}\n\n"
            f"Steps: `{result.steps_file}`; checkpoint: `{result.last_checkpoint}`",
            description="reward per step; each cluster's success and window position",
        )
    validation = validation_report(plan.run_dir)  # TRL's validation, or verl's copied into eval.jsonl
    if validation is not None:
        text, curve = validation
        create_markdown_artifact(
            key=artifact_key(plan.experiment, "validation"),
            markdown=f"# {plan.experiment}: validation\n\n{text}\n{image_markdown(curve, 'validation accuracy')}",
            description="validation accuracy (mean@k) per step and eval set, from RUN_DIR/eval.jsonl",
        )
    table = [{"metric": k, "value": v} for k, v in result.headline.items()]
    if table:
        create_table_artifact(
            key=artifact_key(plan.experiment, "metrics"), table=table, description=f"last step of {plan.experiment}"
        )
    return result


@task(name="publish-comparison", cache_policy=NO_CACHE, retries=0)
def publish_comparison(runs: list[str], out: str) -> dict[str, Any]:
    """`ads compare`'s comparison of RUNS (folders or names under ./ads-runs, or groups NAME=RUN,RUN,...; the first
    is the baseline), written to OUT and published as one markdown artifact: the tables and the plot of accuracy
    against steps and rollouts."""
    from pathlib import Path

    from ads_core.evaluation.compare import load_groups
    from ads_core.evaluation.compare_report import write_comparison
    from ads_prefect.tasks.artifact_keys import artifact_key as key_of

    groups = load_groups(runs)
    result = write_comparison(groups, out)
    names = " vs ".join(groups)
    png = Path(result["paths"]["plot"]).read_bytes()
    create_markdown_artifact(
        key=key_of("compare", "-vs-".join(groups)[:100]),
        markdown=f"# {names}\n\n{result['markdown']}\n{image_markdown(png, 'accuracy against steps and rollouts')}",
        description=f"training runs compared: {names} (ads compare)",
    )
    return {key: result[key] for key in ("baseline", "sets", "headline", "reach", "verdicts", "paths")}
