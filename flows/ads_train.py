"""The `ads-train` flow: check a final ADS artifact, then train GRPO with the ADS sampler on verl.

1. Validate the artifact (verl schema, sampler columns, unique row ids) and the launch environment: without
   CUDA GPUs (and without `dry_run` or a Ray address) the run fails at once with a clear message.
2. Plan the run (`ads_core.train`): stage remote inputs, pick eval sets, check for contamination, compose the
   verl config (our Hydra YAML over verl's `ppo_trainer`) and run verl's own config validation. The resolved
   config and the command are published as a markdown artifact.
3. With `dry_run`, stop there. Otherwise run `python -m ads_core.integrations.verl.main ...` as a
   subprocess, or `ray job submit` when given an http:// Ray address, streaming its log into this run, and
   publish the last step's metrics as a table artifact.

`ads train ARTIFACT [--model M] [--dry-run]` is the same thing without Prefect.
"""

from __future__ import annotations

import collections
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from ads_core import train as tr


def _key(experiment: str, what: str) -> str:
    """Prefect artifact keys: lowercase letters, digits and dashes."""
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in f"ads-train-{experiment}-{what}".lower())
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug.strip("-")


def config_markdown(plan: tr.TrainPlan, dry_run: bool) -> str:
    s = plan.summary()
    rows = "\n".join(f"| {k} | `{v}` |" for k, v in s.items() if k not in ("warnings", "val_files"))
    vals = "".join(f"\n  - `{v}`" for v in plan.val_files) or " none (validation off)"
    warns = "".join(f"\n- {w}" for w in plan.warnings) or "\n- none"
    decon = ""
    if plan.decontamination is not None:
        d = plan.decontamination
        decon = f"\n\n**Decontamination:** {d['contaminated']} of {d['train_rows']} training rows match {d['matches']}"
    return (
        f"# ads-train {'dry run' if dry_run else 'run'}: `{plan.artifact.uri}`\n\n"
        f"| setting | value |\n|---|---|\n{rows}\n\n**Eval sets:**{vals}\n\n**Warnings:**{warns}{decon}\n\n"
        f"## Command\n\n```bash\n{plan.command_line}\n```\n\n"
        f"## Resolved verl config\n\n```yaml\n{plan.config_yaml}```\n"
    )


@task(name="plan-training", cache_policy=NO_CACHE, retries=0)
def plan_training(req: tr.TrainRequest, dry_run: bool) -> tr.TrainPlan:
    return tr.plan_training(req, materialize=not dry_run)


@task(name="run-verl", cache_policy=NO_CACHE, retries=0)
def run_verl(plan: tr.TrainPlan) -> dict[str, float]:
    logger = get_run_logger()
    tail: collections.deque[str] = collections.deque(maxlen=60)
    console_steps: list[str] = []

    def on_line(line: str) -> None:
        tail.append(line)
        if tr.parse_console_metrics(line) is not None:
            console_steps.append(line)
        logger.info(line)

    logger.info("launching (%s): %s", plan.mode, plan.command_line)
    code = tr.launch(plan, on_line=on_line)
    if code != 0:
        raise tr.LaunchError(f"verl exited with status {code}; last lines:\n" + "\n".join(tail))
    return tr.final_metrics(plan, console_steps[-1:])


@flow(name="ads-train", validate_parameters=True)
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
) -> dict[str, Any]:
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
        artifact_uri=artifact_uri, model=model, n_gpus_per_node=n_gpus_per_node, nnodes=nnodes,
        ray_address=ray_address, sampler=dict(sampler or {}), eval_sets=eval_sets, overrides=list(overrides or []),
        run_dir=run_dir, experiment_name=experiment_name, total_training_steps=total_training_steps,
        decontaminate=decontaminate,
    )
    if not dry_run:
        tr.check_launch_environment(req)  # no CUDA here -> fail now, not deep inside Ray
    plan = plan_training(req, dry_run)
    experiment = plan.experiment
    for warning in plan.warnings:
        logger.warning(warning)
    create_markdown_artifact(key=_key(experiment, "config"), markdown=config_markdown(plan, dry_run),
                             description=f"resolved verl config for {plan.artifact.uri}")
    result: dict[str, Any] = {"dry_run": dry_run, "mode": plan.mode, "command": plan.command,
                              "run_dir": plan.run_dir, "summary": plan.summary()}
    if dry_run:
        print(plan.config_yaml)
        print(f"# command:\n# {plan.command_line}")
        logger.info("dry run: config and command above; nothing launched")
        result["config_yaml"] = plan.config_yaml
        return result
    metrics = run_verl(plan)
    table = [{"metric": k, "value": v} for k, v in sorted(tr.headline(metrics).items())]
    if table:
        create_table_artifact(key=_key(experiment, "metrics"), table=table,
                              description=f"last training step of {experiment}")
    result["metrics"] = metrics
    return result
