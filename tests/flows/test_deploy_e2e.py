"""End to end, the way users run it: a real `prefect server` (session fixture, own PREFECT_HOME, free port on
127.0.0.1), the process work pool, `prefect deploy` from deployments/prefect.yaml (with its concurrency limits),
the failure automation from deployments/automations.yaml, a worker, and `prefect deployment run ads-build/myds`
with no --param (the bundled GSM8K sample, the default model); then a CPU worker on the train queue runs the
ads-train run the build started (TRL, a few real GRPO steps)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ads_core.stages.sort import check_invariants


def prefect_cli(h: Any, server: Any, *args: str, timeout: float = 120, **env: str) -> str:
    proc = subprocess.run(
        [h.prefect, *args], cwd=h.repo, env=server.env(**env), capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"prefect {' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def run_deployment_and_wait(h: Any, server: Any, name: str, *params: str, timeout: float, cli: bool = True) -> Any:
    """`prefect deployment run NAME --param ...` (or, with cli=False, the same call from this process, which
    saves a CLI start) and poll the run until it is final (or the timeout passes)."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    if cli:
        args = [a for p in params for a in ("--param", p)]
        created = prefect_cli(h, server, "deployment", "run", name, *args)
        run_id = re.search(r"UUID: ([0-9a-f-]{36})", created).group(1)
    else:
        assert not params
        run_id = run_deployment(name, timeout=0).id
    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while True:
            run = client.read_flow_run(run_id)
            if run.state.is_final() or time.monotonic() > deadline:
                return run
            time.sleep(1)


def apply_failure_automation(h: Any, server: Any, tmp_path: Path) -> Any:
    """The README's step 8: save a notification block, fill its id into deployments/automations.yaml, `prefect
    automation create --from-file`; the automation as the server returns it."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.client.orchestration import get_client

    block_id = CustomWebhookNotificationBlock(name="ads-alerts", url="http://127.0.0.1:9/alerts").save(
        "ads-alerts", overwrite=True
    )
    declared = (h.repo / "deployments" / "automations.yaml").read_text()
    resolved = tmp_path / "ads-automations.yaml"
    resolved.write_text(declared.replace("ADS_ALERT_BLOCK_ID", str(block_id)))
    prefect_cli(h, server, "automation", "create", "--from-file", str(resolved))
    with get_client(sync_client=True) as client:
        found = client.read_automations_by_name("ads-pipeline-run-failed")
    assert len(found) == 1, found
    action = found[0].actions[0]
    assert action.type == "send-notification" and action.block_document_id == block_id
    assert found[0].trigger.match_related.root["prefect.resource.name"] == ["ads-build", "ads-train"]
    return found[0]


@pytest.mark.slow
def test_deployment_run_builds_publishes_and_starts_training(
    helpers: Any, prefect_api: Any, ads_env: dict, tiny_model: str, tmp_path: Path
):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId, FlowFilter, FlowFilterName

    h, server = helpers, prefect_api  # the session's real server; in-process clients talk to it too
    out_root = tmp_path / "ads-out"
    prefect_cli(h, server, "work-pool", "create", "ads-process", "--type", "process")
    deployed = prefect_cli(h, server, "--no-prompt", "deploy", "--prefect-file", "deployments/prefect.yaml", "--all")
    assert "ads-build/myds" in deployed and "ads-train/myds" in deployed
    automation = apply_failure_automation(h, server, tmp_path)
    # An operator's change to the training deployment: 2 steps of small groups, so the test stays short.
    from prefect.client.schemas.actions import DeploymentUpdate

    with get_client(sync_client=True) as client:
        train_deployment = client.read_deployment_by_name("ads-train/myds")
        small = {"steps": 2, "trl": {"num_generations": 2, "max_completion_length": 8}, "run_dir": str(tmp_path / "tr")}
        client.update_deployment(train_deployment.id, DeploymentUpdate(parameters=small))

    # The worker serves the build queue only, so the ads-train run it triggers stays Scheduled for inspection.
    worker_env = server.env(
        ADS_OUT_DIR=str(out_root),
        PREFECT_WORKER_QUERY_SECONDS="1",
        ADS_CACHE_DIR=ads_env["ADS_CACHE_DIR"],
        ADS_LOCK_DIR=ads_env["ADS_LOCK_DIR"],
    )
    worker = h.start_process(
        [h.prefect, "worker", "start", "--pool", "ads-process", "--work-queue", "build"],
        tmp_path / "worker.log",
        worker_env,
    )
    try:
        run = run_deployment_and_wait(h, server, "ads-build/myds", timeout=300)
        assert run.state.is_completed(), f"{run.state}\n{(tmp_path / 'worker.log').read_text()[-4000:]}"
        rerun = run_deployment_and_wait(h, server, "ads-build/myds", timeout=300, cli=False)  # nothing changed
    finally:
        h.stop_process(worker)
    log = (tmp_path / "worker.log").read_text()
    assert run.state.is_completed(), f"{run.state}\n{log[-4000:]}"
    assert run.name.startswith("build-myds-")

    # 1. the final artifact meets the sort invariants
    final_uri = str(out_root / "myds" / "final" / "train.parquet")
    check_invariants(h.read_final(final_uri), 300)

    # 2. the run shows table, markdown, link and progress artifacts
    arts = {a.key: a for a in h.artifacts_of(run.id)}
    types = {a.type for a in arts.values()}
    assert {"table", "markdown", "progress"} <= types
    assert {"ads-myds-format-counts", "ads-myds-cluster-sizes", "ads-myds-difficulty-quantiles"} <= set(arts)
    assert json.loads(arts["ads-myds-format-counts"].data)[0] == {"what": "read", "rows": 300, "example": ""}
    assert arts["ads-myds-cluster-examples"].type == "markdown"
    assert final_uri in arts["ads-myds-final"].data  # named as a path: a browser will not follow file:// links
    assert float(arts["ads-myds-score-progress"].data) == 100.0

    # 3. an ads-train/myds run was started with the artifact's URI, labelled with the build, under the name the
    #    summary gives it; the finished builds hold no task run that is not finished
    with get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name("ads-train/myds")
        build_deployment = client.read_deployment_by_name("ads-build/myds")
        trains = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["ads-train"])),
            deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])),
        )
    assert len(trains) == 1, trains  # the unchanged second build started no training run
    assert f"started ads-train/myds run {trains[0].name}" in arts["ads-myds-refresh"].data
    assert re.fullmatch(r"train-myds-\d{8}T\d{6}Z", trains[0].name), trains[0].name
    refresh = {a.key: a for a in h.artifacts_of(rerun.id)}["ads-myds-refresh"].data
    waiting = rf"not started: ads-train/myds run {trains[0].name} is (Scheduled|Late) \(waiting for a worker\) on"
    assert re.search(waiting, refresh), refresh
    assert not h.pending_task_runs(run.id) and not h.pending_task_runs(rerun.id)
    assert rerun.state.is_completed(), rerun.state
    compute = {r.name: r.state.name for r in h.task_runs(rerun.id) if r.name in h.STAGE_KEYS}
    assert sorted(compute) == sorted(h.STAGE_KEYS) and set(compute.values()) == {"Cached"}, compute
    assert trains[0].deployment_id == deployment.id
    assert trains[0].parameters["artifact_uri"] == final_uri
    assert trains[0].labels["ads.build_flow_run_id"] == str(run.id)  # the build that started it
    assert trains[0].labels["ads.build_flow_run_name"] == run.name
    assert f"/runs/flow-run/{trains[0].id})" in arts["ads-myds-refresh"].data  # the summary links its page
    assert [s.active for s in build_deployment.schedules] == [False]  # the nightly refresh is off by default
    for declared in (build_deployment, deployment):  # one run at a time per deployment; a second one queues
        assert declared.global_concurrency_limit is not None and declared.global_concurrency_limit.limit == 1
        assert declared.concurrency_options.collision_strategy.value == "ENQUEUE", declared.concurrency_options
    assert automation.enabled and automation.trigger.expect == {
        "prefect.flow-run.Failed",
        "prefect.flow-run.Crashed",
        "prefect.flow-run.TimedOut",
    }

    # 4. the worker is stopped (by PID, above); the server and moto fixtures stop theirs the same way
    assert not h.pid_alive(worker.pid)

    # 5. A CPU worker on the train queue runs the ads-train run the build started: TRL (auto, no CUDA here) trains
    #    its real GRPO steps and completes; the run shows the progress artifact and the training plot. (A verl dry
    #    run of the flow, and its resolved config, is tests/flows/test_ads_train.py's.)
    train_worker = h.start_process(
        [h.prefect, "worker", "start", "--pool", "ads-process", "--work-queue", "train"],
        tmp_path / "train-worker.log",
        worker_env,
    )
    try:
        deadline = time.monotonic() + 300
        with get_client(sync_client=True) as client:
            while not (child := client.read_flow_run(trains[0].id)).state.is_final() and time.monotonic() < deadline:
                time.sleep(1)
    finally:
        h.stop_process(train_worker)
    train_log = (tmp_path / "train-worker.log").read_text()
    assert child.state.is_completed(), f"{child.state}\n{train_log[-4000:]}"
    assert child.name == trains[0].name  # the name the build gave it, kept when it ran
    arts = {a.key: a for a in h.artifacts_of(child.id)}
    progress = [a for a in arts.values() if a.type == "progress"]
    assert len(progress) == 1 and float(progress[0].data) == 100.0, arts
    plot = arts["ads-train-myds-ads-training"]
    assert plot.type == "markdown" and "](data:image/png;base64," in plot.data  # inline, as the build's plots
    metrics = {row["metric"]: row["value"] for row in json.loads(arts["ads-train-myds-ads-metrics"].data)}
    assert metrics["step"] == 2 and 0 <= metrics["lag"] <= 1
    assert "trl" in arts["ads-train-myds-ads-config"].data
    steps = [json.loads(line) for line in (tmp_path / "tr" / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2] and (tmp_path / "tr" / "checkpoints" / "checkpoint-2").is_dir()
    assert not h.pid_alive(train_worker.pid)
