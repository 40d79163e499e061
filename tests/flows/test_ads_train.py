"""The `ads-train` flow under Prefect's test harness: a dry run completes and publishes the resolved config;
a third trainer is one class plus one registration (a fake one runs through `ads train` and the flow);
without CUDA a real run fails at once; a broken artifact fails with the reason, in one line that names the
flow parameter and without a traceback; an unexpected error keeps its traceback; runs are named
`train-<dataset>-<UTC time>`."""

from __future__ import annotations

import logging
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest


@pytest.fixture(scope="module")
def train_prefect(prefect_api: Any) -> Any:
    """The session's Prefect server (one server start less): every query here is by flow run id, and the other
    tests that read ads-train runs filter by their own deployment, so the runs made here disturb nothing."""
    return prefect_api


def run_of(state: Any, level: int = 0) -> tuple[str, list[str]]:
    """The flow run's name and every log line at LEVEL or above it and its tasks sent to the API (tracebacks
    included)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    flow_run_id = state.state_details.flow_run_id
    APILogWorker.drain_all(timeout=10)
    with get_client(sync_client=True) as client:
        name = client.read_flow_run(flow_run_id).name
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    return name, [log.message for log in logs if log.level >= level]


def assert_run_name(name: str, dataset: str, before: datetime) -> None:
    m = re.fullmatch(rf"train-{re.escape(dataset)}-(\d{{8}}T\d{{6}}Z)", name)
    assert m, name
    stamp = datetime.strptime(m.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert before.replace(microsecond=0) <= stamp <= datetime.now(UTC)  # UTC, taken when the run started


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real final artifact: `ads build` on the bundled sample with the tiny local model."""
    from ads_core.pipeline.build import BuildConfig, build

    os.environ.setdefault("ADS_CACHE_DIR", str(tmp_path_factory.mktemp("ads-cache")))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = tmp_path_factory.mktemp("ads-out")
    return Path(build(None, str(out), BuildConfig()).final_uri)


def test_dry_run_completes_and_shows_the_resolved_config(train_prefect, artifact: Path, tmp_path: Path):
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from prefect.artifacts import Artifact
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from ads_prefect.flows.ads_train import ads_train

    before = datetime.now(UTC)
    state = ads_train(
        artifact_uri=str(artifact),
        dry_run=True,
        trainer="verl",
        run_dir=str(tmp_path / "run"),
        eval_sets=[],
        sampler={"ads": {"active_clusters": 2, "mini_cluster_size": 16}},
        verl={"n_gpus_per_node": 2, "overrides": ["trainer.save_freq=5"]},
        return_state=True,
    )
    assert state.is_completed(), state.message
    result = state.result()
    assert result["dry_run"] is True and result["mode"] == "local" and result["trainer"] == "verl"
    cfg = OmegaConf.create(result["config_yaml"])
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert cfg.data.train_batch_size == 32 and cfg.trainer.save_freq == 5 and cfg.trainer.n_gpus_per_node == 2
    assert result["sampler"]["sampler"]["ads"]["mini_cluster_size"] == 16  # what the launch writes to sampler.json
    assert result["sampler_file"] == cfg.ads.sampler_file == str(tmp_path / "run" / "sampler.json")

    published = Artifact.get("ads-train-gsm8k-sample-ads-verl-config")
    assert published is not None and published.type == "markdown"
    text = published.data
    assert "## Resolved verl config" in text and "use_v1: false" in text and '"mini_cluster_size": 16' in text
    assert "-m ads_core.train.verl.main" in text
    assert not (tmp_path / "run").exists()
    name, _ = run_of(state)
    assert_run_name(name, manifest_dataset(artifact), before)


def manifest_dataset(artifact: Path) -> str:
    import json

    return json.loads((artifact.parent / "manifest.json").read_text())["extra"]["dataset"]


def test_without_cuda_a_real_verl_run_fails_at_once(train_prefect, artifact: Path, monkeypatch: pytest.MonkeyPatch):
    """Refused before anything of verl's runs, so it needs no verl installed."""
    from ads_core.train import choice
    from ads_core.train import plan as tr
    from ads_prefect.flows.ads_train import ads_train

    def no_planning(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("planned although the machine cannot train")

    monkeypatch.setattr(choice, "cuda_gpu_count", lambda: 0)
    monkeypatch.setattr(tr, "plan_training", no_planning)
    state = ads_train(artifact_uri=str(artifact), trainer="verl", return_state=True)
    assert state.is_failed()
    assert "needs CUDA GPUs" in state.message
    assert "dry_run=true" in state.message and "--dry-run" not in state.message  # the flow's parameter
    assert "verl.ray_address" in state.message and "--ray-address" not in state.message
    assert "\n" not in state.message
    _, logs = run_of(state)
    assert not any("Traceback" in line for line in logs), logs
    _, errors = run_of(state, logging.ERROR)
    assert len(errors) == 1 and "needs CUDA GPUs" in errors[0]  # one error line in the run log
    ray = sys.modules.get("ray")  # verl's runtime: never started (without verl installed it cannot be)
    assert ray is None or not ray.is_initialized()


def test_a_broken_artifact_fails_with_the_reason(train_prefect, artifact: Path, tmp_path: Path):
    from ads_prefect.flows.ads_train import ads_train

    broken = tmp_path / "mybroken" / "final" / "train.parquet"
    broken.parent.mkdir(parents=True)
    pq.write_table(pq.read_table(artifact).drop(["rank_in_cluster"]), broken)
    before = datetime.now(UTC)
    state = ads_train(artifact_uri=str(broken), dry_run=True, return_state=True)
    assert state.is_failed() and "missing column 'rank_in_cluster'" in state.message
    assert "\n" not in state.message
    name, logs = run_of(state)
    assert not any("Traceback" in line for line in logs), logs
    assert any("missing column 'rank_in_cluster'" in line for line in logs)
    assert_run_name(name, "mybroken", before)  # no manifest: OUT's folder name


def test_an_unknown_policy_names_the_model_parameter(train_prefect, artifact: Path, tmp_path: Path):
    from ads_prefect.flows.ads_train import ads_train

    state = ads_train(
        artifact_uri=str(artifact), dry_run=True, model=str(tmp_path / "no-such-model"), eval_sets=[], return_state=True
    )
    assert state.is_failed() and "does not exist on this machine" in state.message
    assert "pass model (" in state.message and "--model" not in state.message


@pytest.mark.filterwarnings("ignore:Logger 'prefect.flow_runs' attempted to send logs:UserWarning")
def test_an_unexpected_error_keeps_its_traceback(train_prefect, artifact: Path, monkeypatch: pytest.MonkeyPatch):
    from ads_core.train import plan as tr
    from ads_prefect.flows.ads_train import ads_train

    def broken_planner(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug in the planner")

    monkeypatch.setattr(tr, "plan_training", broken_planner)
    state = ads_train(artifact_uri=str(artifact), dry_run=True, return_state=True)
    assert state.is_failed() and "a bug in the planner" in state.message
    # the state: one line; the traceback: in the run's log only
    assert state.message == "training failed: RuntimeError: a bug in the planner (traceback in the log)"
    _, logs = run_of(state)
    assert any("Traceback" in line and "broken_planner" in line for line in logs), logs

    # As a worker runs it (`python -m prefect.engine`: run_flow with the run's logger), Prefect's "Engine execution
    # exited with unexpected exception" record says the same in one line instead of a second traceback.
    from prefect.exceptions import FailedRun
    from prefect.flow_engine import run_flow

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    run_logger = logging.getLogger("prefect.flow_runs")
    run_logger.addHandler(handler)
    try:
        with pytest.raises(FailedRun):
            run_flow(ads_train, parameters={"artifact_uri": str(artifact), "dry_run": True}, error_logger=run_logger)
    finally:
        run_logger.removeHandler(handler)
    engine = [r for r in records if "a bug in the planner" in r.getMessage() and r.levelno >= logging.ERROR]
    assert [r.getMessage() for r in engine if r.exc_info is None] == [
        "Run failed: training failed: RuntimeError: a bug in the planner (traceback in the log)"
    ]
    assert not any("Engine execution exited" in r.getMessage() for r in records)


# -- a third trainer: one class, one registration -------------------------------------------------------------------


@pytest.fixture
def fake_trainer(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Register FAKE (a trainer defined here, nothing else edited) in a copy of the trainer registry; the calls
    it receives are recorded."""
    from ads_core.common.registry import Registry
    from ads_core.train import trainers

    calls: list[Any] = []

    class FakePart:
        def summary(self) -> dict[str, Any]:
            return {"fake_rows": "all of them"}

        def describe(self) -> str:
            return "## The fake trainer's part\n"

        def dry_run_text(self) -> str:
            return "fake: nothing to resolve\n"

        def launch_line(self) -> str:
            return "fake steps, no model"

        def outputs(self, dry_run: bool) -> dict[str, Any]:
            return {"fake_dry_run": dry_run}

    class FakeTrainer:
        priority = 100  # above verl and TRL: `auto` asks it first
        streams_steps = True
        ads_defaults = {"mini_cluster_size": 1}

        def can_run_here(self, cfg: Any) -> tuple[bool, str]:
            return True, "the fake trainer runs anywhere"

        def check_machine(self, cfg: Any, dry_run: bool) -> None:
            calls.append(("check_machine", dry_run))

        def plan(self, plan: Any, materialize: bool) -> FakePart:
            calls.append(("plan", materialize, plan.prompts_per_step))
            return FakePart()

        def execute(self, plan: Any, on_step: Any, on_line: Any, score: Any) -> Any:
            steps = []
            for step in range(1, plan.config.steps + 1):
                record = {"step": step, "reward_mean": 0.5, "success_mean": 0.5, "active_clusters": 4, "lag": 0}
                record["window_position"] = None
                if step == plan.config.steps:  # what TRL's hooks add when no group had a reward spread
                    record["warnings"] = ["no learning signal in steps 1-2: try more num_generations"]
                    record["warning_options"] = ("num_generations",)
                steps.append(record)
                if on_step is not None:
                    on_step(record, self)
            calls.append(("execute", len(steps)))
            last = {"step": float(len(steps)), "reward_mean": 0.5}
            return trainers.TrainResult("fake", plan.run_dir, None, steps, last, last, seconds=0.1)

        def read_checkpoint_state(self, run_dir: str) -> None:
            return None

    trainers.load_built_ins()
    registry = Registry("trainer")
    for name in trainers.TRAINERS.names():
        registry.register(name)(trainers.TRAINERS.get(name))
    monkeypatch.setattr(trainers, "TRAINERS", registry)
    trainers.register_trainer("fake")(FakeTrainer)
    return calls


def test_a_fake_trainer_runs_through_ads_train_and_the_flow(
    train_prefect, fake_trainer: list[Any], artifact: Path, tmp_path: Path
):
    from typer.testing import CliRunner

    from ads_cli.main import app
    from ads_prefect.flows.ads_train import ads_train

    base = ["train", str(artifact), "--no-eval", "--steps", "3", "--run-dir", str(tmp_path / "cli")]
    dry = CliRunner().invoke(app, [*base, "--dry-run"])  # auto asks the fake first
    assert dry.exit_code == 0, dry.output
    assert "fake: nothing to resolve" in dry.output and "dry run (fake: auto: the fake trainer runs anywhere)" in (
        " ".join(dry.output.split())
    )
    assert fake_trainer == [("check_machine", True), ("plan", False, 4)]  # its own ads_defaults: 4 x 1 prompts
    fake_trainer.clear()
    run = CliRunner().invoke(app, [*base, "--trainer", "fake"])
    assert run.exit_code == 0, run.output
    text = " ".join(run.output.split())
    assert "training with fake (trainer=fake as set): fake steps, no model" in text and "reward_mean" in text
    assert "warning: no learning signal in steps 1-2: try more --num-generations" in text
    assert fake_trainer == [("check_machine", False), ("plan", True, 4), ("execute", 3)]

    fake_trainer.clear()
    state = ads_train(
        artifact_uri=str(artifact),
        trainer="fake",
        steps=2,
        run_dir=str(tmp_path / "flow"),
        eval_sets=[],
        return_state=True,
    )
    assert state.is_completed(), state.message
    result = state.result()
    assert result["trainer"] == "fake" and result["steps"] == 2 and result["fake_dry_run"] is False
    assert result["summary"]["fake_rows"] == "all of them" and result["metrics"] == {"step": 2.0, "reward_mean": 0.5}
    assert fake_trainer == [("check_machine", False), ("check_machine", False), ("plan", True, 4), ("execute", 2)]
    _, logs = run_of(state)
    assert any(line.startswith("step 2/2: reward 0.500") for line in logs), logs
    # no learning signal: in the run's state message and an artifact of its own, not only in the log
    assert state.message == "trained with a warning: no learning signal in steps 1-2: try more trl.num_generations"
    assert result["warnings"] == ["no learning signal in steps 1-2: try more trl.num_generations"]
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id]))
        )
    warned = [a for a in found if a.key and a.key.endswith("-warnings")]
    assert len(warned) == 1 and "- no learning signal in steps 1-2" in str(warned[0].data), [a.key for a in found]

    published = CliRunner().invoke(app, [*base[:-1], str(tmp_path / "published"), "--trainer", "fake", "--publish"])
    assert published.exit_code == 0, published.output
    line = " ".join(published.output.split())
    assert "published: " in line and "(trained with a warning: no learning signal in steps 1-2" in line, line
    assert fake_trainer[-1] == ("execute", 3)


def test_class_path_plugins_run_through_ads_train_and_the_flow(
    train_prefect, artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A trainer with one option and a sampler kind with one knob, outside the package (tests/plugin_module.py
    copied to a folder on sys.path), named by class path: the same values reach both through `ads train --set`
    and the flow's `options`."""
    import shutil

    from typer.testing import CliRunner

    from ads_cli.main import app
    from ads_prefect.flows.ads_train import ads_train

    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(Path(__file__).parents[1] / "plugin_module.py", site / "plugin_module.py")
    monkeypatch.syspath_prepend(str(site))
    plugins = ["--trainer", "plugin_module:Tiny", "--sampler", "plugin_module:coin", "--no-eval"]
    values = ["--set", "tiny.warmth=0.75", "--set", "sampler.coin.knob=9", "--run-dir", str(tmp_path / "cli")]
    dry = CliRunner().invoke(app, ["train", str(artifact), *plugins, *values, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "tiny: warmth=0.75 knob=9" in dry.output and "dry run (plugin_module:Tiny" in dry.output
    flag = CliRunner().invoke(app, ["train", str(artifact), *plugins, "--warmth", "0.5", "--dry-run"])
    assert flag.exit_code == 0 and "tiny: warmth=0.5 knob=3" in flag.output, flag.output  # its flag; a default

    state = ads_train(
        artifact_uri=str(artifact),
        dry_run=True,
        trainer="plugin_module:Tiny",
        sampler={"kind": "plugin_module:coin"},
        eval_sets=[],
        run_dir=str(tmp_path / "flow"),
        options={"tiny.warmth": 0.75, "sampler.coin.knob": 9},
        return_state=True,
    )
    assert state.is_completed(), state.message
    result = state.result()
    assert result["trainer"] == "plugin_module:Tiny" and result["tiny"] == "tiny: warmth=0.75 knob=9"
