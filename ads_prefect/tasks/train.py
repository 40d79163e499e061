"""Prefect tasks of the `ads-train` flow: plan the verl run, run it; plus the helpers the flow publishes with.

Errors that mean "fix the input or the machine" (`EXPECTED_ERRORS`) fail a run with one line that names
the flow parameter to change (`dry_run=true`, not `--dry-run`); anything else keeps its traceback.
"""

from __future__ import annotations

import collections
import logging
import re
from datetime import datetime

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from ads_core.core.errors import InputError
from ads_core.train import artifact as ta
from ads_core.train import launch as tl
from ads_core.train import plan as tr
from ads_core.train.verl.config import ConfigError

EXPECTED_ERRORS: tuple[type[Exception], ...] = (ta.ArtifactError, tl.LaunchError, ConfigError, ValueError, InputError)
PLAN_TASK = "plan-training"
RUN_TASK = "run-verl"


def spell_param(field: str) -> str:
    """How the `ads-train` flow spells a training option: its parameter name, booleans as ``dry_run=true``."""
    return "dry_run=true" if field == "dry_run" else field


def error_line(exc: BaseException) -> str:
    """An expected error as the one line a flow run fails with."""
    return tl.error_text(exc, spell_param)


class _NoTracebackForExpectedErrors(logging.Filter):
    """Prefect logs every failed task run with its traceback; for bad input in our tasks it is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, EXPECTED_ERRORS) and getattr(record, "task_name", None) in (PLAN_TASK, RUN_TASK):
            record.msg, record.args = f"Task run failed: {error_line(exc)}", ()
            record.exc_info, record.exc_text = None, None
        return True


def _install_filter() -> None:
    logger = logging.getLogger("prefect.task_runs")
    if not any(isinstance(f, _NoTracebackForExpectedErrors) for f in logger.filters):
        logger.addFilter(_NoTracebackForExpectedErrors())


_install_filter()


def train_run_name(artifact_uri: str, now: datetime) -> str:
    """``train-<dataset>-<UTC time>``: the dataset from the artifact's manifest, else its folders."""
    try:
        manifest = ta.read_manifest(artifact_uri) if artifact_uri else None
    except Exception:  # noqa: BLE001 - a run name must never fail the run (unreachable storage, odd URI)
        manifest = None
    dataset = re.sub(r"[^A-Za-z0-9._-]+", "-", ta.dataset_of(artifact_uri, manifest)).strip("-") or "dataset"
    return f"train-{dataset}-{now.strftime('%Y%m%dT%H%M%SZ')}"


def artifact_key(experiment: str, what: str) -> str:
    """Prefect artifact keys: lowercase letters, digits and dashes."""
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in f"ads-train-{experiment}-{what}".lower())
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug.strip("-")


def config_markdown(plan: tr.TrainPlan, dry_run: bool) -> str:
    """The resolved config, the command and the warnings, as the run's markdown artifact."""
    s = plan.summary()
    rows = "\n".join(f"| {k} | `{v}` |" for k, v in s.items() if k not in ("warnings", "val_files"))
    vals = "".join(f"\n  - `{v}`" for v in plan.val_files) or " none (validation off)"
    warns = "".join(f"\n- {w}" for w in plan.warnings_for(spell_param)) or "\n- none"
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


@task(name=PLAN_TASK, cache_policy=NO_CACHE, retries=0)
def plan_training(req: tr.TrainRequest, dry_run: bool) -> tr.TrainPlan:
    """Check the artifact, stage inputs (unless a dry run), compose and validate the verl config."""
    return tr.plan_training(req, materialize=not dry_run)


@task(name=RUN_TASK, cache_policy=NO_CACHE, retries=0)
def run_verl(plan: tr.TrainPlan) -> dict[str, float]:
    """Run verl, streaming its output into this run's log; the last step's metrics."""
    logger = get_run_logger()
    console_steps: collections.deque[str] = collections.deque(maxlen=1)

    def on_line(line: str) -> None:
        if tl.parse_console_metrics(line) is not None:
            console_steps.append(line)
        logger.info(line)

    logger.info("launching (%s): %s", plan.mode, plan.command_line)
    code = tl.launch(plan, on_line=on_line)
    if code != 0:
        raise tl.LaunchError(
            f"verl exited with status {code}; its output is in this run's log above (run dir {plan.run_dir})"
        )
    return tl.final_metrics(plan, list(console_steps))
