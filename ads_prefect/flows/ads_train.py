"""The `ads-train` flow: check a final ADS artifact, then train GRPO with the ADS sampler (TRL or verl).

Its parameters are `artifact_uri`, `dry_run`, the fields of the config tree `ads_core.train.options.TrainConfig`
(generated from it by `ads_prefect.flows.params`, as `ads train`'s flags are: the same names, types, defaults and
help): the neutral fields (`trainer`, `model`, `steps`, `run_dir`, `name`, `eval_sets`, ...), the `sampler`
section (the kind and every kind's knobs), `validation` and one section per registered trainer, each shown typed in
the UI; and `options` (`section.field: value`, like `ads train --set`), where a trainer or sampler kind named by
class path gets its options.

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

import inspect
from datetime import UTC, datetime
from typing import Any

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.states import Completed, Failed, State
from pydantic import ValidationError

from ads_core.common.errors import InputError
from ads_core.config.base import error_line
from ads_core.train import run as trun
from ads_core.train.options import TrainConfig, load_train_config
from ads_prefect.flows.params import with_config_parameters
from ads_prefect.flows.setup import flow, prepare_process
from ads_prefect.runtime.prefect_env import TRAIN_TIMEOUT_ENV, TRAIN_TIMEOUT_S, flow_timeout
from ads_prefect.tasks import train as tt
from ads_prefect.tasks.handoff import RUN_NAME

OPTIONS = inspect.Parameter(
    "options", inspect.Parameter.KEYWORD_ONLY, default={}, annotation=dict[str, Any]
)  # like `ads train --set`
DOCS = {
    "artifact_uri": "OUT/final/train.parquet (local path or s3://).",
    "dry_run": "check everything and publish the plan (and verl's resolved config); train nothing.",
    "options": 'any option as section.field: value, like `ads train --set` (e.g. {"trl.learning_rate": 1e-6}); '
    "the options of a trainer or sampler kind named by class path (trainer: my_pkg.mod:MyTrainer) go here.",
}


def _run_name() -> str:
    """``train-<dataset>-<UTC time>``, from this run's ``artifact_uri`` parameter; a run created with such a
    name (by the build's hand-off) keeps it, so the build's summary names the run the runs list shows."""
    from prefect.runtime import flow_run

    if RUN_NAME.fullmatch(str(flow_run.name or "")):
        return str(flow_run.name)
    return tt.train_run_name(str(flow_run.parameters.get("artifact_uri") or ""), datetime.now(UTC))


def ads_train(artifact_uri: str, dry_run: bool = False, **config: Any) -> dict[str, Any] | State:
    """Train GRPO with the ADS sampler (or a baseline) on the final artifact of an `ads-build` run.

    The parameters after `dry_run` are the fields of the config tree (`ads_core.train.options.TrainConfig`: the
    neutral options, a section per registered trainer and the sampler with every kind's knobs), each section
    one typed parameter; `options` takes any option as `section.field: value`, like `ads train --set` (the
    options of a trainer or sampler kind named by class path go there)."""
    prepare_process()
    logger = get_run_logger()
    try:
        options = config.pop("options", None) or {}
        cfg = load_train_config(config, options)
        result = _train(artifact_uri, cfg, dry_run)
        if result.get("warnings"):  # trained, but e.g. with no learning signal: said in the run's state too
            more = f" (and {len(result['warnings']) - 1} more)" if len(result["warnings"]) > 1 else ""
            return Completed(message=f"trained with a warning: {result['warnings'][0]}{more}", data=result)
        return result
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
    if outcome.warnings:
        result["warnings"] = outcome.warnings
    return result


ads_train = flow(
    name="ads-train",
    flow_run_name=_run_name,
    validate_parameters=True,
    timeout_seconds=flow_timeout(TRAIN_TIMEOUT_ENV, TRAIN_TIMEOUT_S),  # ADS_TRAIN_TIMEOUT_S, default 7 days
)(
    with_config_parameters(
        ads_train,
        TrainConfig,
        leading=[
            inspect.Parameter("artifact_uri", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str),
            inspect.Parameter("dry_run", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=False, annotation=bool),
        ],
        trailing=[OPTIONS],
        docs=DOCS,
    )
)


def publish_training(artifact_uri: str, cfg: TrainConfig, dry_run: bool = False) -> tuple[State, str]:
    """`ads train --publish`: this training as a named `ads-train` flow run on the configured Prefect server (its
    plan, progress, plots, metrics and warnings as artifacts); returns its final state and its page (or id)."""
    from prefect.settings import PREFECT_API_URL

    from ads_prefect.runtime.runs import run_url

    if not PREFECT_API_URL.value():
        raise InputError("--publish needs a Prefect server: start one with `ads server` and set PREFECT_API_URL")
    wanted = inspect.signature(ads_train.fn).parameters
    params = {name: getattr(cfg, name) for name in type(cfg).model_fields if name in wanted}
    others = [name for name in type(cfg).model_fields if name not in wanted]  # plug-ins named by class path
    if others and "options" in wanted:
        dumped = cfg.model_dump(mode="json", include=set(others))
        params["options"] = {f"{s}.{k}": v for s, section in dumped.items() for k, v in (section or {}).items()}
    state = ads_train(artifact_uri=artifact_uri, dry_run=dry_run, **params, return_state=True)
    flow_run_id = str(state.state_details.flow_run_id)
    return state, run_url(flow_run_id) or f"flow run {flow_run_id}"
