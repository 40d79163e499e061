"""The README's Prefect block, end to end, as a user runs it: `ads server` in one terminal (waited for until it says
it is ready), the block's other lines in another with `.venv/bin` on PATH (the project's profile, the process work
pool, `prefect deploy` from deployments/prefect.yaml with its concurrency limits), the failure automation from
deployments/automations.yaml, the worker in a third terminal, and `prefect deployment run ads-build/myds` with no
--param (the bundled GSM8K sample, the default model); the only change is the port (4200 -> a free one). The build
publishes its artifacts and starts the ads-train run, which the same worker runs (TRL, a few real GRPO steps); a
second, unchanged build starts no other. Everything is stopped by PID."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ads_core.stages.sort import check_invariants

README = Path(__file__).resolve().parents[2] / "README.md"
LONG_RUNNING = ("ads server", "prefect worker start")  # the block's "terminal 1" and "terminal 2" lines


def prefect_block() -> list[str]:
    """The command lines of the README's fenced block under "## Deploy on Prefect" (comment-only lines dropped)."""
    section = README.read_text().split("## Deploy on Prefect", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def prefect_cli(h: Any, env: dict[str, str], *args: str, timeout: float = 120) -> str:
    proc = subprocess.run([h.prefect, *args], cwd=h.repo, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"prefect {' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def wait_final(run_id: Any, timeout: float, *watched: tuple[subprocess.Popen[Any], Path]) -> Any:
    """Poll a flow run until it is final (or the timeout passes); fail early, with its log, if a watched process
    (the server, the worker) has exited."""
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout
    with get_client(sync_client=True) as client:
        while not (run := client.read_flow_run(run_id)).state.is_final() and time.monotonic() < deadline:
            for proc, log in watched:
                assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
            time.sleep(1)
    return run


def apply_failure_automation(h: Any, env: dict[str, str], tmp_path: Path) -> Any:
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
    prefect_cli(h, env, "automation", "create", "--from-file", str(resolved))
    with get_client(sync_client=True) as client:
        found = client.read_automations_by_name("ads-pipeline-run-failed")
    assert len(found) == 1, found
    action = found[0].actions[0]
    assert action.type == "send-notification" and action.block_document_id == block_id
    assert found[0].trigger.match_related.root["prefect.resource.name"] == ["ads-build", "ads-train"]
    return found[0]


@pytest.mark.slow
def test_the_readme_prefect_block_deploys_builds_publishes_and_trains(
    helpers: Any, ads_env: dict[str, str], tiny_model: str, prefect_home_copy: Any, tmp_path: Path
):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentUpdate
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId, FlowFilter, FlowFilterName
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    h = helpers
    port = h.free_port()
    lines = [line.replace("4200", str(port)) for line in prefect_block()]
    server_line = next(line for line in lines if line.startswith(LONG_RUNNING[0]))
    worker_line = next(line for line in lines if line.startswith(LONG_RUNNING[1]))
    exports = [line for line in lines if line.startswith("export ")]  # "every terminal"
    first = lines[lines.index(server_line) + 1 : lines.index(worker_line)]
    then = lines[lines.index(worker_line) + 1 :]
    assert first[0].startswith("export PREFECT_PROFILES_PATH=") and len(then) == 1
    assert then[0].startswith("prefect deployment run ads-build/myds ")

    checkout = tmp_path / "checkout"  # the repository root as a user has it ($PWD/.prefect is written there)
    checkout.mkdir()
    for name in ("ads_core", "ads_prefect", "ads_cli", "deployments", "pyproject.toml"):
        (checkout / name).symlink_to(h.repo / name)
    (tmp_path / "home").mkdir()
    out_root = tmp_path / "ads-out"
    # The user after the README's first command: the ADS cache holds the default model and the default build's
    # scores. Their server's database is a copy of that cache's migrated one when there is one (PREFECT_HOME, as
    # `ads server` documents): a fresh database's migrations cost ~13 CPU-s.
    home = prefect_home_copy(Path(ads_env["ADS_CACHE_DIR"]) / "prefect", tmp_path / "prefect-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ADS_"))}
    env.update(
        PATH=f"{Path(h.prefect).parent}:{env.get('PATH', '')}",
        HOME=str(tmp_path / "home"),
        ADS_CACHE_DIR=ads_env["ADS_CACHE_DIR"],
        ADS_OUT_DIR=str(out_root),
        PREFECT_HOME=str(home),
        HF_HUB_OFFLINE="1",
        DO_NOT_TRACK="1",
        PREFECT_WORKER_QUERY_SECONDS="1",
    )
    url = f"http://127.0.0.1:{port}/api"

    def terminal(script_lines: list[str], log: str) -> subprocess.Popen[Any]:
        return h.start_process(["bash", "-e", "-c", "\n".join(script_lines)], tmp_path / log, env, checkout)

    server = terminal([server_line], "server.log")
    worker = None
    try:
        deadline = time.monotonic() + 240
        while "ads server: ready" not in (tmp_path / "server.log").read_text(errors="replace"):
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()[-3000:]
            time.sleep(0.5)
        steps = subprocess.run(
            ["bash", "-e", "-c", "\n".join(first)], cwd=checkout, env=env, capture_output=True, text=True, timeout=300
        )
        assert steps.returncode == 0, f"{steps.stdout[-3000:]}\n{steps.stderr[-3000:]}"
        deployed = steps.stdout + steps.stderr
        assert "ads-build/myds" in deployed and "ads-train/myds" in deployed
        assert (checkout / ".prefect" / "profiles.toml").is_file()  # the project's profile, not ~/.prefect's
        assert not (tmp_path / "home" / ".prefect" / "profiles.toml").exists()

        with temporary_settings({PREFECT_API_URL: url}):  # this process reads the server the block started
            automation = apply_failure_automation(h, {**env, "PREFECT_API_URL": url}, tmp_path)
            # An operator's change to the training deployment: 2 steps of small groups, so the test stays short.
            with get_client(sync_client=True) as client:
                train_deployment = client.read_deployment_by_name("ads-train/myds")
                small = {
                    "steps": 2,
                    "trl": {"num_generations": 2, "max_completion_length": 8},
                    "run_dir": str(tmp_path / "tr"),
                }
                client.update_deployment(train_deployment.id, DeploymentUpdate(parameters=small))

            worker = terminal([*exports, worker_line], "worker.log")
            watched = ((server, tmp_path / "server.log"), (worker, tmp_path / "worker.log"))
            started = subprocess.run(
                ["bash", "-e", "-c", "\n".join([*exports, *then])],
                cwd=checkout,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert started.returncode == 0, f"{started.stdout[-3000:]}\n{started.stderr[-3000:]}"
            run_id = re.search(r"UUID: ([0-9a-f-]{36})", started.stdout).group(1)  # type: ignore[union-attr]
            run = wait_final(run_id, 300, *watched)
            assert run.state.is_completed(), f"{run.state}\n{(tmp_path / 'worker.log').read_text()[-4000:]}"
            with get_client(sync_client=True) as client:
                deployment = client.read_deployment_by_name("ads-train/myds")
                build_deployment = client.read_deployment_by_name("ads-build/myds")
                (train,) = client.read_flow_runs(
                    flow_filter=FlowFilter(name=FlowFilterName(any_=["ads-train"])),
                    deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])),
                )
            child = wait_final(train.id, 300, *watched)  # the block's worker serves the train queue too
            rerun = wait_final(run_deployment("ads-build/myds", timeout=0).id, 300, *watched)  # nothing changed
            with get_client(sync_client=True) as client:
                trains = client.read_flow_runs(
                    flow_filter=FlowFilter(name=FlowFilterName(any_=["ads-train"])),
                    deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])),
                )
            arts = {a.key: a for a in h.artifacts_of(run.id)}
            refresh = {a.key: a for a in h.artifacts_of(rerun.id)}["ads-myds-refresh"].data
            child_arts = {a.key: a for a in h.artifacts_of(child.id)}
            pending = h.pending_task_runs(run.id) + h.pending_task_runs(rerun.id)
            compute = {r.name: r.state.name for r in h.task_runs(rerun.id) if r.name in h.STAGE_KEYS}
    finally:
        for proc in (worker, server):
            if proc is not None:
                h.stop_process(proc)
    assert run.name.startswith("build-myds-")

    # 1. the final artifact meets the sort invariants
    final_uri = str(out_root / "myds" / "final" / "train.parquet")
    check_invariants(h.read_final(final_uri), 300)

    # 2. the run shows table, markdown, link and progress artifacts
    types = {a.type for a in arts.values()}
    assert {"table", "markdown", "progress"} <= types
    assert {"ads-myds-format-counts", "ads-myds-cluster-sizes", "ads-myds-difficulty-quantiles"} <= set(arts)
    assert json.loads(arts["ads-myds-format-counts"].data)[0] == {"what": "read", "rows": 300, "example": ""}
    assert arts["ads-myds-cluster-examples"].type == "markdown"
    assert final_uri in arts["ads-myds-final"].data  # named as a path: a browser will not follow file:// links
    assert float(arts["ads-myds-score-progress"].data) == 100.0

    # 3. an ads-train/myds run was started with the artifact's URI, labelled with the build, under the name the
    #    summary gives it; the second, unchanged build started none; no finished build holds an unfinished task run
    assert [t.id for t in trains] == [train.id], trains
    assert f"started ads-train/myds run {train.name}" in arts["ads-myds-refresh"].data
    assert re.fullmatch(r"train-myds-\d{8}T\d{6}Z", train.name), train.name
    assert f"not started: ads-train/myds run {train.name} already trained on this final artifact" in refresh, refresh
    assert not pending, pending
    assert rerun.state.is_completed(), rerun.state
    assert sorted(compute) == sorted(h.STAGE_KEYS) and set(compute.values()) == {"Cached"}, compute
    assert train.deployment_id == deployment.id
    assert train.parameters["artifact_uri"] == final_uri
    assert train.labels["ads.build_flow_run_id"] == str(run.id)  # the build that started it
    assert train.labels["ads.build_flow_run_name"] == run.name
    assert f"/runs/flow-run/{train.id})" in arts["ads-myds-refresh"].data  # the summary links its page
    assert [s.active for s in build_deployment.schedules] == [False]  # the nightly refresh is off by default
    for declared in (build_deployment, deployment):  # one run at a time per deployment; a second one queues
        assert declared.global_concurrency_limit is not None and declared.global_concurrency_limit.limit == 1
        assert declared.concurrency_options.collision_strategy.value == "ENQUEUE", declared.concurrency_options
    assert automation.enabled and automation.trigger.expect == {
        "prefect.flow-run.Failed",
        "prefect.flow-run.Crashed",
        "prefect.flow-run.TimedOut",
    }

    # 4. the training run: TRL (auto, no CUDA here) trained its real GRPO steps and completed, under the name the
    #    build gave it; it shows the progress artifact and the training plot. (A verl dry run of the flow, and its
    #    resolved config, is tests/flows/test_ads_train.py's.)
    assert child.state.is_completed(), f"{child.state}\n{(tmp_path / 'worker.log').read_text()[-4000:]}"
    assert child.name == train.name
    progress = [a for a in child_arts.values() if a.type == "progress"]
    assert len(progress) == 1 and float(progress[0].data) == 100.0, child_arts
    plot = child_arts["ads-train-myds-ads-training"]
    assert plot.type == "markdown" and "](data:image/png;base64," in plot.data  # inline, as the build's plots
    metrics = {row["metric"]: row["value"] for row in json.loads(child_arts["ads-train-myds-ads-metrics"].data)}
    assert metrics["step"] == 2 and 0 <= metrics["lag"] <= 1
    assert "trl" in child_arts["ads-train-myds-ads-config"].data
    steps = [json.loads(line) for line in (tmp_path / "tr" / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2] and (tmp_path / "tr" / "checkpoints" / "checkpoint-2").is_dir()

    # 5. the worker and the server are stopped (by PID, above)
    assert not h.pid_alive(worker.pid) and not h.pid_alive(server.pid)
