"""The `ads-train` flow: check a final ADS artifact, then train GRPO with the ADS sampler (TRL or verl).

Its parameters are `artifact_uri`, `dry_run` and the fields of `ads_core.config.train.TrainConfig` (the same
names, types and defaults; a test checks them): `trainer` (auto, or a registered trainer: verl, trl), `model`,
`steps`, `run_dir`, `name`, `eval_sets`, `decontaminate` and the sections `sampler`, `verl`, `trl`, each shown
typed, with its help, in the UI.

1. Plan (`ads_core.train.run.prepare`): pick the trainer (`auto`: verl where CUDA GPUs, verl and a rollout
   engine are present, TRL otherwise), check the artifact, the eval sets and contamination; for verl compose
   and validate its config. The plan is published as a markdown artifact.
2. With `dry_run`, stop there. Otherwise the chosen trainer runs in task `run-<trainer>` (`run-trl`,
   `run-verl`): a trainer that reports its steps (TRL, in this run) drives a progress artifact and at the end the
   run shows the reward curve, each cluster's success and window position (an inline PNG); a trainer that runs
   as a subprocess (verl) streams its log into the run. Both publish the last step's headline numbers.

Runs are named `train-<dataset>-<UTC time>` (a run the build created already has that name and keeps it). Bad
input or a machine that can't train (`tasks.train.EXPECTED_ERRORS`) fails the run with one line that names the
parameter to change, without a traceback; any other error (a training failure) also ends in a one-line state
message, with its traceback in the run's log. The flow times out after `ADS_TRAIN_TIMEOUT_S` (7 days; 0: never).
`ads train ARTIFACT` is the same thing without Prefect.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.states import Failed, State
from pydantic import ValidationError

from ads_core.config.base import error_line
from ads_core.config.train import (
    DecontaminateMode,
    TrainConfig,
    TrainSamplerConfig,
    TRLConfig,
    ValidationConfig,
    VerlConfig,
)
from ads_core.train import run as trun
from ads_prefect.flows.setup import prepare_process
from ads_prefect.runtime.prefect_env import TRAIN_TIMEOUT_ENV, TRAIN_TIMEOUT_S, flow_timeout
from ads_prefect.tasks import train as tt
from ads_prefect.tasks.handoff import RUN_NAME

DEFAULTS = TrainConfig()  # the flow's defaults are the config's, never a second copy


def _run_name() -> str:
    """``train-<dataset>-<UTC time>``, from this run's ``artifact_uri`` parameter; a run created with such a
    name (by the build's hand-off) keeps it, so the build's summary names the run the runs list shows."""
    from prefect.runtime import flow_run

    if RUN_NAME.fullmatch(str(flow_run.name or "")):
        return str(flow_run.name)
    return tt.train_run_name(str(flow_run.parameters.get("artifact_uri") or ""), datetime.now(UTC))


@flow(
    name="ads-train",
    flow_run_name=_run_name,
    validate_parameters=True,
    timeout_seconds=flow_timeout(TRAIN_TIMEOUT_ENV, TRAIN_TIMEOUT_S),  # ADS_TRAIN_TIMEOUT_S, default 7 days
)
def ads_train(
    artifact_uri: str,
    dry_run: bool = False,
    trainer: str = DEFAULTS.trainer,
    model: str | None = DEFAULTS.model,
    steps: int = DEFAULTS.steps,
    run_dir: str | None = DEFAULTS.run_dir,
    name: str | None = DEFAULTS.name,
    eval_sets: list[str] | None = DEFAULTS.eval_sets,
    allow_change: list[str] = DEFAULTS.allow_change,
    decontaminate: DecontaminateMode = DEFAULTS.decontaminate,
    sampler: TrainSamplerConfig = TrainSamplerConfig(),
    verl: VerlConfig = VerlConfig(),
    trl: TRLConfig = TRLConfig(),
    validation: ValidationConfig = ValidationConfig(),
) -> dict[str, Any] | State:
    """Train GRPO with the ADS sampler (or a baseline) on the final artifact of an `ads-build` run.

    Args:
        artifact_uri: OUT/final/train.parquet (local path or s3://).
        dry_run: check everything and publish the plan (and verl's resolved config); train nothing.
        trainer: auto (verl where CUDA GPUs, verl and a rollout engine are present, or with verl.ray_address;
            TRL otherwise), verl or trl.
        model: policy to train; default: the model the difficulties were scored with (the artifact manifest).
        steps: optimizer steps (the reference trains 800).
        run_dir: checkpoints, the per-step log and staged inputs (default ./ads-runs/{name}).
        name: experiment name, default {dataset}-ads; the same name resumes from the newest checkpoint.
        eval_sets: names under OUT/eval (`ads eval-sets`) or .parquet paths; default all in OUT/eval; [] for none.
        allow_change: options a resume may change on purpose (e.g. ["learning_rate"]); recorded in
            RUN_DIR/run.json. Any other option that differs from the run's refuses the resume.
        decontaminate: off, report, or drop training rows whose question is in an eval set.
        sampler: which sampler (kind: ads, uniform, dots) and its knobs; e.g. {"ads": {"alpha": 0.5}}.
        verl: GPUs per node, nodes, Ray address, extra Hydra overrides (verl only).
        trl: generations per prompt, completion length, learning rate, checkpoints (TRL only; CPU-sized).
        validation: validate on the eval sets every `steps` steps and after the last, `k` samples per problem of
            the first `limit` problems (default: 8 problems and k 2 on a CPU, all and k 16 on a GPU), into
            RUN_DIR/eval.jsonl; e.g. {"steps": 50, "k": 16}.
    """
    prepare_process()
    logger = get_run_logger()
    try:
        cfg = TrainConfig(
            trainer=trainer,
            model=model,
            steps=steps,
            run_dir=run_dir,
            name=name,
            eval_sets=eval_sets,
            allow_change=allow_change,
            decontaminate=decontaminate,
            sampler=sampler,
            verl=verl,
            trl=trl,
            validation=validation,
        )
        return _train(artifact_uri, cfg, dry_run)
    except ValidationError as exc:
        message = error_line(exc)
        logger.error(message)
        return Failed(message=message)
    except tt.EXPECTED_ERRORS as exc:  # bad input or a machine that can't train: one line, no traceback
        message = tt.error_line(exc)
        logger.error(message)
        return Failed(message=message)
    except Exception as exc:  # a training failure: the traceback in the run's log, one line in its state
        message = tt.failure_line(exc)
        logger.error("%s", message, exc_info=True)
        return Failed(message=message)


def _train(artifact_uri: str, cfg: TrainConfig, dry_run: bool) -> dict[str, Any]:
    logger = get_run_logger()
    trun.check_machine(cfg, dry_run)  # a machine that can't run the trainer fails here, in one line
    plan = tt.prepare_training(artifact_uri, cfg, dry_run)
    for warning in plan.warnings_for(tt.spell_param):
        logger.warning(warning)
    create_markdown_artifact(
        key=tt.artifact_key(plan.experiment, "config"),
        markdown=tt.config_markdown(plan, dry_run),
        description=f"training plan ({plan.trainer}) for {plan.artifact.uri}",
    )
    result: dict[str, Any] = {
        "dry_run": dry_run,
        "trainer": plan.trainer,
        "run_dir": plan.run_dir,
        "summary": plan.summary(),
    }
    part = plan.part
    assert part is not None  # prepared
    result |= part.outputs(dry_run)
    if dry_run:
        print(part.dry_run_text())
        logger.info("dry run (%s, %s): nothing launched", plan.trainer, plan.trainer_reason)
        return result
    outcome = tt.run_training(plan)
    result |= {"metrics": outcome.metrics, "steps_file": outcome.steps_file, "checkpoint": outcome.last_checkpoint}
    result["steps"] = len(outcome.steps)
    return result
