"""The `ads-train` flow: check a final ADS artifact, then train GRPO with the ADS sampler on verl.

1. Validate the artifact (verl schema, sampler columns, unique row ids) and the launch environment: without
   CUDA GPUs (and without `dry_run` or a Ray address) the run fails at once with a clear message.
2. Plan the run (`ads_core.train`): stage remote inputs, pick eval sets, check for contamination, compose the
   verl config (our Hydra YAML over verl's `ppo_trainer`) and run verl's own config validation. The resolved
   config and the command are published as a markdown artifact.
3. With `dry_run`, stop there. Otherwise run `python -m ads_core.integrations.verl.main ...` as a
   subprocess, or `ray job submit` when given an http:// Ray address, streaming its log into this run, and
   publish the last step's metrics as a table artifact.

Runs are named `train-<dataset>-<UTC time>`. Bad input or a machine that can't train (`tasks.train.
EXPECTED_ERRORS`) fails the run with one line that names the parameter to change, without a traceback;
any other error keeps its traceback. The tasks live in `tasks/train.py`.

`ads train ARTIFACT [--model M] [--dry-run]` is the same thing without Prefect.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.states import Failed, State

from ads_core.train import launch as tl
from ads_core.train import plan as tr
from ads_prefect.tasks import train as tt


def _run_name() -> str:
    """``train-<dataset>-<UTC time>``, from this run's ``artifact_uri`` parameter."""
    from prefect.runtime import flow_run

    return tt.train_run_name(str(flow_run.parameters.get("artifact_uri") or ""), datetime.now(UTC))


@flow(name="ads-train", flow_run_name=_run_name, validate_parameters=True)
def ads_train(
    artifact_uri: str,
    model: str | None = None,
    dry_run: bool = False,
    n_gpus_per_node: int = 1,
    nnodes: int = 1,
    ray_address: str | None = None,
    sampler: dict[str, Any] | None = None,
    eval_sets: list[str] | None = None,
    overrides: list[str] | None = None,
    total_training_steps: int | None = None,
    run_dir: str | None = None,
    experiment_name: str | None = None,
    decontaminate: str = "report",
) -> dict[str, Any] | State:
    """Train GRPO with the ADS sampler on verl, on the final artifact of an `ads-build` run.

    Args:
        artifact_uri: OUT/final/train.parquet (local path or s3://; staged locally when launching here).
        model: policy to train; default: the model the difficulties were scored with (the artifact manifest).
        dry_run: validate and print the resolved verl config and the command, then stop.
        n_gpus_per_node: GPUs per node (trainer.n_gpus_per_node).
        nnodes: number of nodes (trainer.nnodes).
        ray_address: http://head:8265 submits a Ray job; `auto` or ray://head:10001 joins a running cluster
            with the driver here; none starts a local Ray.
        sampler: ADS sampler settings (data.ads_sampler.*), e.g. {"alpha": 0.3, "mini_cluster_size": 32}.
        eval_sets: validation sets: names under OUT/eval (`ads eval-sets`) or .parquet paths; default all in
            OUT/eval; [] for none.
        overrides: extra verl Hydra overrides (key=value), applied last.
        total_training_steps: trainer.total_training_steps (default 800).
        run_dir: checkpoints, metrics and staged inputs (default ./ads-runs/<experiment>).
        experiment_name: default <dataset>-ads; the same name resumes from the last checkpoint.
        decontaminate: off, report, or drop training rows whose question is in an eval set.
    """
    logger = get_run_logger()
    req = tr.TrainRequest(
        artifact_uri=artifact_uri,
        model=model,
        n_gpus_per_node=n_gpus_per_node,
        nnodes=nnodes,
        ray_address=ray_address,
        sampler=dict(sampler or {}),
        eval_sets=eval_sets,
        overrides=list(overrides or []),
        run_dir=run_dir,
        experiment_name=experiment_name,
        total_training_steps=total_training_steps,
        decontaminate=decontaminate,
    )
    try:
        return _train(req, dry_run)
    except tt.EXPECTED_ERRORS as exc:  # bad input or a machine that can't train: one line, no traceback
        message = tt.error_line(exc)
        logger.error(message)
        return Failed(message=message)


def _train(req: tr.TrainRequest, dry_run: bool) -> dict[str, Any]:
    logger = get_run_logger()
    if not dry_run:
        tl.check_launch_environment(req)  # no CUDA here -> fail now, not deep inside Ray
    plan = tt.plan_training(req, dry_run)
    experiment = plan.experiment
    for warning in plan.warnings_for(tt.spell_param):
        logger.warning(warning)
    create_markdown_artifact(
        key=tt.artifact_key(experiment, "config"),
        markdown=tt.config_markdown(plan, dry_run),
        description=f"resolved verl config for {plan.artifact.uri}",
    )
    result: dict[str, Any] = {
        "dry_run": dry_run,
        "mode": plan.mode,
        "command": plan.command,
        "run_dir": plan.run_dir,
        "summary": plan.summary(),
    }
    if dry_run:
        print(plan.config_yaml)
        print(f"# command:\n# {plan.command_line}")
        logger.info("dry run: config and command above; nothing launched")
        result["config_yaml"] = plan.config_yaml
        return result
    metrics = tt.run_verl(plan)
    table = [{"metric": k, "value": v} for k, v in sorted(tl.headline(metrics).items())]
    if table:
        create_table_artifact(
            key=tt.artifact_key(experiment, "metrics"), table=table, description=f"last training step of {experiment}"
        )
    result["metrics"] = metrics
    return result
