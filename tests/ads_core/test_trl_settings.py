"""The `trl` section's own settings, without training: the schedule's horizon (set > recorded > first command's
steps), HF's scheduler names, the trackers, the machine checks (vLLM, processes) and the torchrun line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ads_core.train import choice
from ads_core.train.errors import LaunchError, TrainOptionError
from ads_core.train.options import TrainConfig
from ads_core.train.trl import settings


def test_the_horizon_is_the_first_commands_steps_unless_set(tmp_path: Path):
    first = TrainConfig(steps=2).with_overrides({"trl.lr_scheduler": "cosine"})
    assert settings.schedule_horizon(first, tmp_path) == 2 and settings.recorded_horizon(tmp_path) is None
    settings.record_horizon(first, tmp_path, 2)
    extended = first.replaced(steps=5)  # the same run, resumed and extended: the recorded horizon stays
    assert settings.schedule_horizon(extended, tmp_path) == 2
    assert "schedule_steps" in settings.schedule_warnings(extended, 2)[0]  # past its end: said, not hidden
    assert settings.schedule_warnings(first, 2) == [] and settings.schedule_warnings(TrainConfig(steps=5), 2) == []
    explicit = extended.with_overrides({"trl.schedule_steps": 5})
    assert settings.schedule_horizon(explicit, tmp_path) == 5
    settings.record_horizon(explicit, tmp_path, 5)
    assert json.loads((tmp_path / settings.SCHEDULE_FILE).read_text())["schedule_steps"] == 5
    (tmp_path / settings.SCHEDULE_FILE).write_text("{torn")  # an unreadable record: this command's steps
    assert settings.schedule_horizon(extended, tmp_path) == 5


def test_grpo_arguments_use_trls_names():
    cfg = TrainConfig().with_overrides(
        {"trl.lr_scheduler": "constant", "trl.warmup_steps": 3, "trl.report_to": ["tensorboard", "wandb"]}
    )
    kwargs = settings.grpo_kwargs(cfg)
    assert kwargs["lr_scheduler_type"] == "constant_with_warmup" and kwargs["warmup_steps"] == 3
    assert kwargs["report_to"] == ["tensorboard", "wandb"] and kwargs["log_completions"] is False
    assert settings.grpo_kwargs(TrainConfig())["report_to"] == "none"
    assert {"loss_type", "epsilon_high", "scale_rewards", "use_vllm", "vllm_mode", "vllm_server_port"} <= set(kwargs)
    with pytest.raises(ValueError, match="none can't be combined"):
        TrainConfig().with_overrides({"trl.report_to": ["none", "wandb"]})
    with pytest.raises(ValueError):
        TrainConfig().with_overrides({"trl.report_to": "neptune"})


def test_vllm_and_processes_are_checked_before_any_work(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(choice, "cuda_gpu_count", lambda: 0)
    monkeypatch.setattr(choice, "installed", lambda module: module != "vllm")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    vllm = TrainConfig().with_overrides({"trl.use_vllm": True})
    with pytest.raises(LaunchError, match="use_vllm needs a CUDA GPU and the vllm package") as err:
        settings.check_machine(vllm)
    assert err.value.options == ("use_vllm",)
    settings.check_machine(vllm, dry_run=True)  # a dry run shows the settings anywhere
    assert "Generation: vLLM (colocate)" in settings.describe(vllm, "/nonexistent")
    two = TrainConfig().with_overrides({"trl.processes": 2})
    settings.check_machine(two)  # on CPU: gloo
    assert settings.needs_launch(two) and not settings.needs_launch(TrainConfig())
    command = settings.torchrun_command(2, ["train", "ART", "--processes", "2"])
    assert command[:4] == [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    assert "--nproc_per_node=2" in command and command[-4:] == ["train", "ART", "--processes", "2"]
    monkeypatch.setenv("WORLD_SIZE", "3")  # one of 3 processes, but asked for 2
    assert not settings.needs_launch(two)
    with pytest.raises(TrainOptionError, match="processes=2, but this process is one of 3"):
        settings.check_machine(two)
    monkeypatch.setattr(choice, "cuda_gpu_count", lambda: 1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(LaunchError, match="processes=2 > the 1 CUDA GPU"):
        settings.check_machine(two)
