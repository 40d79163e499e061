"""The ads-train hand-off against a real Prefect server: `on_change` starts training until a run on the final
artifact has completed. A Failed or Crashed run is retried by the next build, up to `run.train_retries`; a
Scheduled or Running one is left alone; a Completed one is never repeated; a Cancelled one is not retried. The
training runs here are flow runs of a test deployment of `ads-train` put in each state through the client (no
worker trains anything), and the hand-off runs as it does in a build: as a task of a flow run, which it leaves
with no task run Pending."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

pytestmark = pytest.mark.usefixtures("prefect_api")


def hand_off(deployment: str, digest: str, policy: str = "on_change", retries: int = 2) -> tuple[dict, list[Any]]:
    """The hand-off as a build calls it: its result, and the task runs of the flow run that called it."""
    from prefect import flow

    from ads_prefect.tasks.handoff import start_training

    @flow(name="handoff-test")
    def build_like() -> dict:
        return start_training(deployment, f"/data/{digest}/final/train.parquet", "myds", digest, policy, retries, "b1")

    state = build_like(return_state=True)
    assert state.is_completed(), state.message
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        tasks = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id]))
        )
    return state.result(), tasks


def training_runs(deployment: str) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        return client.read_flow_runs(
            deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=[deployment.split("/", 1)[1]])),
            sort=FlowRunSort.EXPECTED_START_TIME_ASC,
        )


def set_state(run_id: Any, state: Any) -> None:
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(run_id, state, force=True)


def test_a_failed_or_crashed_training_is_retried_up_to_train_retries(train_deployment: str):
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed, Failed

    digest = f"sha256:{uuid.uuid4().hex}"
    first, tasks = hand_off(train_deployment, digest)
    assert first["new"] and first["line"] == f"started {train_deployment} run {first['name']}"
    assert re.fullmatch(r"train-myds-\d{8}T\d{6}Z", first["name"])  # its final name from the start
    assert {t.name: t.state.type.value for t in tasks} == {"start-training": "COMPLETED"}  # nothing Pending
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(first["id"])
    # the build that made it, in its labels; not a subflow, whose state Prefect would copy into the build's task
    assert run.parent_task_run_id is None
    assert run.labels["ads.build_flow_run_id"] == "b1" and run.labels["ads.build_task_run_id"] == str(tasks[0].id)
    assert run.idempotency_key == f"ads-train:{train_deployment}:{digest}"
    assert run.parameters == {"artifact_uri": f"/data/{digest}/final/train.parquet", "model": None}

    set_state(first["id"], Failed(message="CUDA out of memory"))
    second, _ = hand_off(train_deployment, digest)
    assert second["new"] and second["id"] != first["id"]
    retry = f"retrying training: run {first['name']} Failed, attempt 2 of 3"
    assert second["line"] == f"{retry}: started {train_deployment} run {second['name']}"
    set_state(second["id"], Crashed(message="worker died"))
    third, _ = hand_off(train_deployment, digest)
    assert third["new"] and "retrying training: run " in third["line"] and "Crashed, attempt 3 of 3" in third["line"]
    set_state(third["id"], Failed())
    spent, _ = hand_off(train_deployment, digest)
    assert not spent["new"] and spent["id"] == third["id"]
    assert "attempt 3 of 3; no retries left (run.train_retries=2)" in spent["line"]
    mine = [r for r in training_runs(train_deployment) if digest in (r.idempotency_key or "")]
    assert len(mine) == 3  # one run per attempt, none beyond the bound


def test_a_running_training_is_left_alone_and_a_completed_one_never_repeated(train_deployment: str):
    from prefect.states import Cancelled, Completed, Pending, Running

    digest = f"sha256:{uuid.uuid4().hex}"
    first, _ = hand_off(train_deployment, digest)
    for state in (Pending(), Running()):
        set_state(first["id"], state)
        again, tasks = hand_off(train_deployment, digest)
        assert not again["new"] and again["id"] == first["id"], again
        assert (
            again["line"]
            == f"not started: {train_deployment} run {first['name']} is {state.name} on this final artifact"
        )
        assert all(t.state.is_completed() for t in tasks)
    set_state(first["id"], Completed())
    done, _ = hand_off(train_deployment, digest)
    assert not done["new"] and "already trained on this final artifact" in done["line"]
    assert len([r for r in training_runs(train_deployment) if digest in (r.idempotency_key or "")]) == 1

    other = f"sha256:{uuid.uuid4().hex}"  # a person cancelled it: not retried by a build
    cancelled, _ = hand_off(train_deployment, other)
    set_state(cancelled["id"], Cancelled())
    after, _ = hand_off(train_deployment, other)
    assert not after["new"] and "was Cancelled by a person" in after["line"]


def test_always_starts_one_run_per_build_run_and_a_missing_deployment_is_one_line(train_deployment: str):
    from ads_prefect.tasks.handoff import TrainingTriggerError

    digest = f"sha256:{uuid.uuid4().hex}"
    first, _ = hand_off(train_deployment, digest, policy="always")
    again, _ = hand_off(train_deployment, digest, policy="always")  # the same build run id: the same run
    assert first["new"] and not again["new"] and again["id"] == first["id"]
    from prefect import flow

    from ads_prefect.tasks.handoff import start_training

    @flow(name="handoff-test")
    def missing() -> dict:
        return start_training("ads-train/no-such", "/x/final/train.parquet", "myds", digest, "on_change", 2, "b2")

    state = missing(return_state=True)
    with pytest.raises(TrainingTriggerError, match="deployment 'ads-train/no-such' not found: deploy it"):
        state.result()
