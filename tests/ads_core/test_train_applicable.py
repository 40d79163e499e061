"""Options that don't apply to the run's trainer are refused in one line (exit 2), before any artifact work: a
verl Hydra override with TRL, a TRL field with verl; a config spelling out every default is fine."""

from __future__ import annotations

from pathlib import Path

import pytest

from ads_core.train.applicable import foreign_options, refuse_foreign_options
from ads_core.train.errors import TrainOptionError
from ads_core.train.options import TrainConfig


def _ads_train(*args: str):
    from typer.testing import CliRunner

    from ads_cli.main import app

    return CliRunner().invoke(app, ["train", *args], env={"COLUMNS": "300"})


def test_a_verl_override_with_trl_stops_in_one_line_naming_it(tmp_path: Path):
    missing = str(tmp_path / "no" / "final" / "train.parquet")  # refused before the artifact is even looked at
    result = _ads_train(missing, "--trainer", "trl", "--steps", "2", "actor_rollout_ref.model.lora_rank=32")
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "actor_rollout_ref.model.lora_rank=32" in lines[0] and "verl" in lines[0] and "--trainer" in lines[0]


def test_a_trl_field_with_verl_stops_in_one_line_naming_it(tmp_path: Path):
    missing = str(tmp_path / "no" / "final" / "train.parquet")
    result = _ads_train(missing, "--trainer", "verl", "--dry-run", "--set", "trl.num_generations=8")
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "trl.num_generations=8" in lines[0] and "trains with verl" in lines[0]
    flag = _ads_train(missing, "--trainer", "trl", "--gpus", "2")  # verl's own flag, with TRL
    assert flag.exit_code == 2 and "verl.n_gpus_per_node=2" in flag.output


def test_defaults_spelled_out_and_own_options_pass():
    spelled = TrainConfig.model_validate(TrainConfig().model_dump())  # e.g. a flow run's JSON parameters
    for trainer in ("trl", "verl", "some-plugin"):
        assert foreign_options(spelled, trainer) == []
    own = TrainConfig().with_overrides({"trl.num_generations": 8, "sampler.ads.alpha": 0.5})
    refuse_foreign_options(own, "trl")  # its own section and the shared sampler section
    with pytest.raises(TrainOptionError, match=r"trl\.num_generations=8 applies to the trl trainer only") as err:
        refuse_foreign_options(own, "verl", "auto: 2 CUDA GPU(s), verl and vllm")
    assert err.value.options == ("trainer",)
    both = TrainConfig().with_overrides({"verl.overrides": ["a.b=1", "c.d=2"], "verl.nnodes": 2})
    assert [shown for _, _, shown in foreign_options(both, "trl")] == ["2", "a.b=1", "c.d=2"]
