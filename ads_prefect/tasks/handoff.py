"""The ads-train hand-off: a finished build starts a training run on its final artifact.

`run.trigger_training=on_change` means "no successful training on this final artifact yet". The build reads the
training runs already made for the artifact's content digest from the server (their idempotency keys are
numbered attempts: `ads-train:<deployment>:<digest>`, then `...:attempt-2`, `...:attempt-3`) and decides
(`decide`):

- none yet: start attempt 1;
- the newest is still Scheduled, Pending, Running, Paused or Cancelling: leave it alone (never a duplicate);
- one Completed: done; a Completed training is never repeated;
- the newest Failed or Crashed (a flow timeout is a Failed state, TimedOut): start the next attempt, while
  attempts stay within 1 + `run.train_retries`; after that the summary says none are left;
- the newest Cancelled: a person stopped it; not retried (start one by hand).

Two builds deciding the same at the same moment create the same attempt key, so the server gives both the same
run. `always` starts one run per build run (the key holds the build's flow-run id); `never` starts nothing.

The run is named `train-<dataset>-<UTC time>` from the start, the name the ads-train flow then keeps, so the
summary names the run the runs list shows, and the summary links its page. It carries the build that made it in
its labels (`ads.build_flow_run_id`, `ads.build_flow_run_name`, `ads.build_task_run_id`). It is not a subflow:
Prefect mirrors a subflow's state into its parent task run, so a finished build would show training's Late,
Running or Failed as its own, and `run_deployment(timeout=0)` left its placeholder task run Pending for good.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from prefect import get_run_logger

from ads_prefect.tasks.retries import report_task

ACTIVE = ("SCHEDULED", "PENDING", "RUNNING", "PAUSED", "CANCELLING")
RETRIED = ("FAILED", "CRASHED")
RUN_NAME = re.compile(r"train-[A-Za-z0-9._-]+-\d{8}T\d{6}Z")


class TrainingTriggerError(RuntimeError):
    """The ads-train deployment could not be started (missing deployment, bad parameters)."""


def run_name(dataset: str, now: dt.datetime) -> str:
    """`train-<dataset>-<UTC time>`, the name of an ads-train run (given when it is created, kept when it runs)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", dataset).strip("-") or "dataset"
    return f"train-{slug}-{now.astimezone(dt.UTC).strftime('%Y%m%dT%H%M%SZ')}"


def attempt_key(base: str, attempt: int) -> str:
    """The idempotency key of one training attempt (attempt 1 keeps the plain key of earlier versions)."""
    return base if attempt == 1 else f"{base}:attempt-{attempt}"


def attempt_of(key: str | None, base: str) -> int:
    if key == base:
        return 1
    match = re.fullmatch(re.escape(base) + r":attempt-(\d+)", key or "")
    return int(match.group(1)) if match else 0


@dataclass(frozen=True)
class PastRun:
    """A training run already made for this final artifact."""

    attempt: int
    id: str
    name: str
    state_type: str  # COMPLETED, FAILED, CRASHED, RUNNING, ... (Prefect's StateType)
    state_name: str  # Completed, Failed, TimedOut, Crashed, Running, ...


@dataclass(frozen=True)
class Decision:
    attempt: int | None  # the attempt to start, or None
    line: str  # what the refresh summary says: why nothing starts, or why this attempt starts ("" for a first one)
    existing: PastRun | None = None

    def started(self, deployment: str, name: str) -> str:
        """The summary line once the attempt has started as run NAME."""
        return f"{self.line + ': ' if self.line else ''}started {deployment} run {name}"


def decide(past: list[PastRun], retries: int, deployment: str) -> Decision:
    """What `on_change` does given the runs already made for this artifact (see the module docstring)."""
    attempts = 1 + retries
    done = [r for r in past if r.state_type == "COMPLETED"]
    if done:
        run = done[-1]
        return Decision(None, f"not started: {deployment} run {run.name} already trained on this final artifact", run)
    if not past:
        return Decision(1, "")
    last = max(past, key=lambda r: r.attempt)
    if last.state_type in ACTIVE:
        waiting = " (waiting for a worker)" if last.state_type == "SCHEDULED" else ""  # Scheduled, Late, Awaiting...
        line = f"not started: {deployment} run {last.name} is {last.state_name}{waiting} on this final artifact"
        return Decision(None, line, last)
    if last.state_type in RETRIED and last.attempt < attempts:
        line = f"retrying training: run {last.name} {last.state_name}, attempt {last.attempt + 1} of {attempts}"
        return Decision(last.attempt + 1, line, last)
    if last.state_type in RETRIED:
        line = (
            f"not started: {deployment} run {last.name} {last.state_name}, attempt {last.attempt} of {attempts}; "
            f"no retries left (run.train_retries={retries}): fix the cause, then start one by hand "
            f"(prefect deployment run {deployment} --param artifact_uri=...)"
        )
        return Decision(None, line, last)
    line = f"not started: {deployment} run {last.name} was {last.state_name} by a person; start one by hand to train"
    return Decision(None, line, last)


def _past_runs(client: Any, deployment_id: Any, base: str, retries: int) -> list[PastRun]:
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterDeploymentId,
        FlowRunFilterIdempotencyKey,
    )

    keys = [attempt_key(base, n) for n in range(1, 2 + max(retries, 0) + 1)]  # one beyond: a lowered bound
    runs = client.read_flow_runs(
        flow_run_filter=FlowRunFilter(
            idempotency_key=FlowRunFilterIdempotencyKey(any_=keys),
            deployment_id=FlowRunFilterDeploymentId(any_=[deployment_id]),
        )
    )
    found = [
        PastRun(
            attempt=attempt_of(r.idempotency_key, base),
            id=str(r.id),
            name=str(r.name),
            state_type=r.state.type.value if r.state else "PENDING",
            state_name=r.state.name if r.state else "Pending",
        )
        for r in runs
    ]
    return sorted((r for r in found if r.attempt), key=lambda r: r.attempt)


@report_task("start-training", task_run_name="start-training")
def start_training(
    deployment: str,
    artifact_uri: str,
    dataset: str,
    digest: str,
    policy: str,
    retries: int,
    build_run_id: str,
    build_run_name: str = "",
) -> dict[str, Any]:
    """Start (or not) an ads-train run for the final artifact, and say why in one line (`line`).

    Returns `{"new": bool, "id", "name", "line"}`; `id`/`name` are the run started or the one that decided
    against starting one (None when there is none)."""
    from prefect.client.orchestration import get_client
    from prefect.context import TaskRunContext
    from prefect.exceptions import ObjectNotFound

    logger = get_run_logger()
    base = f"ads-train:{deployment}:{digest}"
    with get_client(sync_client=True) as client:
        try:
            target = client.read_deployment_by_name(deployment)
        except ObjectNotFound as exc:
            raise TrainingTriggerError(
                f"deployment {deployment!r} not found: deploy it (prefect deploy --prefect-file "
                "deployments/prefect.yaml --all) or run ads-build with run.trigger_training=never"
            ) from exc
        if policy == "always":  # one run per build run: its key holds the build's flow-run id
            decision, key = Decision(1, ""), f"ads-train:{deployment}:{build_run_id}:{digest}"
        else:
            decision = decide(_past_runs(client, target.id, base, retries), retries, deployment)
            key = attempt_key(base, decision.attempt or 1)
        if decision.attempt is None:
            existing = decision.existing
            logger.info("%s", decision.line)
            found = {"id": existing.id, "name": existing.name} if existing else {"id": None, "name": None}
            return {"new": False, **found, "line": decision.line}
        context = TaskRunContext.get()
        me = str(context.task_run.id) if context else ""  # the same id when this task is retried
        run = client.create_flow_run_from_deployment(
            target.id,
            parameters={"artifact_uri": artifact_uri, "model": None},  # model None: the policy the build scored with
            name=run_name(dataset, dt.datetime.now(dt.UTC)),
            idempotency_key=key,
            labels={
                "ads.build_flow_run_id": build_run_id,
                "ads.build_flow_run_name": build_run_name,
                "ads.build_task_run_id": me,
            },
        )
    new = not me or (run.labels or {}).get("ads.build_task_run_id") == me  # else another build made it just now
    line = decision.started(deployment, str(run.name))
    if not new:
        line = f"not started: {deployment} run {run.name} (the same attempt) was started by another build just now"
    logger.info("%s (flow run %s, for %s)", line, run.id, artifact_uri)
    return {"new": new, "id": str(run.id), "name": str(run.name), "line": line}
