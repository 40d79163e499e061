"""Training options defined once: the CPU-sized TRL defaults (and that setting a size explicitly wins), the
`ads-train` flow's parameters equal to `TrainConfig`'s fields, the `auto` trainer choice, and sampler kinds as one
registry entry each. (verl reads the sampler from the run's sampler.json, not from a YAML copy of its defaults:
tests/ads_core/test_verl_sampler_file.py, tests/integrations/test_train_config.py.)"""

from __future__ import annotations

import inspect
import typing
from pathlib import Path

import numpy as np
import pytest

from ads_core.common.registry import DuplicateBackendError
from ads_core.sampler import kinds
from ads_core.train import choice, trainers
from ads_core.train.options import TrainConfig
from ads_core.train.trl.options import TRL_MINI_CLUSTER_SIZE


def prompts(cfg: TrainConfig, trainer: str) -> int:
    """Prompts per optimizer step under TRAINER: the ADS batch with the trainer's own defaults."""
    return trainers.sampler_config(cfg, trainer).ads.batch_size


def test_cpu_defaults_are_cpu_sized_and_a_set_size_wins():
    cfg = TrainConfig()
    assert prompts(cfg, "trl") == 4 * TRL_MINI_CLUSTER_SIZE == 8  # 4 clusters x 2 rows
    assert (cfg.trl.num_generations, cfg.trl.max_completion_length) == (4, 48)
    assert prompts(cfg, "verl") == 128  # the reference's batch, as verl always had it
    # set through any path (constructor, --set / -s, a replaced copy), the value is kept under TRL too
    explicit = TrainConfig(sampler={"ads": {"mini_cluster_size": 32}})
    assert prompts(explicit, "trl") == 128
    assert prompts(TrainConfig().with_overrides({"sampler.ads.mini_cluster_size": 32}), "trl") == 128
    # setting something else leaves the size at the trainer's default
    other = TrainConfig().with_overrides({"sampler.ads.alpha": 0.5}).replaced(steps=3)
    assert prompts(other, "trl") == 8 and other.sampler.ads.alpha == 0.5 and other.steps == 3


def test_the_flow_parameters_are_the_train_config_fields():
    pytest.importorskip("prefect")
    from ads_prefect.flows.ads_train import ads_train

    params = inspect.signature(ads_train.fn).parameters
    assert list(params)[:2] == ["artifact_uri", "dry_run"] and list(params)[-1] == "options"
    assert set(params) - {"artifact_uri", "dry_run", "options"} == set(TrainConfig.model_fields)
    defaults = TrainConfig()
    for name, field in TrainConfig.model_fields.items():
        default = params[name].default
        if hasattr(default, "model_dump"):
            assert default.model_dump() == getattr(defaults, name).model_dump(), name
        else:
            assert default == getattr(defaults, name), name
        assert typing.get_type_hints(ads_train.fn)[name] == field.annotation, name


def test_the_sampler_flag_picks_the_kind_and_s_sets_an_ads_knob(tmp_path: Path):
    from typer.testing import CliRunner

    from ads_cli.main import app

    artifact = tmp_path / "missing" / "final" / "train.parquet"
    result = CliRunner().invoke(app, ["train", str(artifact), "--sampler", "bogus", "--dry-run"])
    assert result.exit_code == 2 and "--sampler" in result.output  # the kind, validated against the registry
    result = CliRunner().invoke(app, ["train", str(artifact), "-s", "alpah=0.5", "--dry-run"])
    assert result.exit_code == 2 and "sampler.ads.alpah" in result.output


@pytest.mark.parametrize(
    ("gpus", "present", "address", "expected"),
    [
        (0, {"verl", "vllm"}, None, "trl"),  # no CUDA: verl is GPU-only
        (2, {"verl", "vllm"}, None, "verl"),
        (2, {"verl", "sglang"}, None, "verl"),
        (2, {"verl"}, None, "trl"),  # no rollout engine
        (2, {"vllm"}, None, "trl"),  # no verl
        (0, set(), "http://head:8265", "verl"),  # a Ray cluster has the GPUs
    ],
)
def test_auto_picks_verl_only_where_it_can_train(monkeypatch: pytest.MonkeyPatch, gpus, present, address, expected):
    monkeypatch.setattr(choice, "cuda_gpu_count", lambda: gpus)
    monkeypatch.setattr(choice, "installed", lambda module: module in present)
    cfg = TrainConfig(verl={"ray_address": address})
    trainer, reason = trainers.choose_trainer(cfg)
    assert trainer.name == expected and reason.startswith("auto: ")
    chosen, why = trainers.choose_trainer(cfg.replaced(trainer="trl"))
    assert (chosen.name, why) == ("trl", "trainer=trl as set")
    assert trainers.choose_trainer(cfg.replaced(trainer="verl"))[0].name == "verl"
    for kind in ("dots-lite", "uniform"):  # verl trains every kind whose needs it meets
        assert (
            trainers.choose_trainer(TrainConfig(verl={"ray_address": address}, sampler={"kind": kind}))[0].name
            == expected
        )
    dots, why = trainers.choose_trainer(TrainConfig(verl={"ray_address": address}, sampler={"kind": "dots"}))
    assert dots.name == "trl"  # verl can't roll out DOTS's reference sets, wherever it can train
    assert ("needs reference_rollouts, which trainer verl does not support" in why) == (expected == "verl")
    dynamic, why = trainers.choose_trainer(TrainConfig(verl={"ray_address": address}, sampler={"kind": "dynamic"}))
    assert dynamic.name == "trl" and "extra batches" in why  # its steps roll out more: verl's v0 loop can't
    with pytest.raises(ValueError, match="unknown trainer 'nope'; choose one of auto, verl, trl"):
        trainers.choose_trainer(cfg.replaced(trainer="nope"))


def test_a_trainer_name_is_taken_once():
    trainers.load_built_ins()
    with pytest.raises(DuplicateBackendError, match="trainer 'trl' is already registered"):
        trainers.register_trainer("trl")(type("Again", (), {}))


def tiny_predictor(folder: Path, rows: int) -> str:
    """A DOTS predictor artifact over ROWS random embeddings (one epoch: only its shape matters here)."""
    from ads_core.sampler.dots import artifact, predictor

    rng = np.random.default_rng(0)
    z = rng.normal(size=(rows, 8)).astype(np.float32)
    model = predictor.fit(z, {"a": rng.random(rows)}, predictor.FitSettings(hidden=8, layers=1, epochs=1))
    artifact.save(str(folder / "predictor"), model, z, [str(i) for i in range(rows)], {})
    return str(folder / "predictor")


def test_every_sampler_kind_is_one_registry_entry(tmp_path: Path):
    assert kinds.kind_names()[:5] == ["ads", "uniform", "dots", "dots-lite", "dynamic"]
    assert {k: kinds.kind_spec(k).options.__name__ for k in kinds.kind_names()[:5]} == {
        "ads": "ADSSamplerConfig",
        "uniform": "UniformSamplerConfig",
        "dots": "DotsSamplerConfig",
        "dots-lite": "DifficultyTargetedConfig",
        "dynamic": "DynamicSamplingConfig",
    }
    assert list(TrainConfig.model_fields["sampler"].annotation.model_fields)[:6] == [
        "kind",
        "ads",
        "uniform",
        "dots",
        "dots_lite",
        "dynamic",
    ]
    with pytest.raises(DuplicateBackendError, match="'ads' is already registered"):
        kinds.register_kind("ads")(lambda *a: None)
    cid = np.repeat(np.arange(4), 10)
    rank = np.tile(np.arange(10), 4)
    cfg = trainers.sampler_config(TrainConfig(sampler={"dots": {"predictor": tiny_predictor(tmp_path, 40)}}), "trl")
    for kind in kinds.kind_names():
        sampler = kinds.build_sampler(kind, cid, rank, cfg, 8)
        rows = sampler.next_batch()
        assert len(rows) == 8 and sampler.batch_size == 8
        sampler.update(rows, np.full(len(rows), 0.5))
        fresh = kinds.build_sampler(kind, cid, rank, cfg, 8)
        fresh.load_state_dict(sampler.state_dict())
        assert fresh.state_dict() == sampler.state_dict()
    with pytest.raises(ValueError, match="unknown sampler kind 'nope'"):
        kinds.build_sampler("nope", cid, rank, cfg, 8)


def test_every_simulated_sampler_is_made_by_build_sampler(monkeypatch: pytest.MonkeyPatch):
    """The kinds registry is the only factory: the simulator's samplers (all of them, the ads-* variants too) are
    made through `build_sampler` (the artifact check's: tests/integrations/test_train_config.py)."""
    from ads_lab.config.simulate import SimulationConfig
    from ads_lab.simulator import learners
    from ads_lab.simulator import run as sim

    made: list[str] = []

    def counting(kind: str, *args, **kwargs):
        made.append(kind)
        return kinds.build_sampler(kind, *args, **kwargs)

    monkeypatch.setattr(sim, "build_sampler", counting)
    cfg = SimulationConfig(num_clusters=4, median_cluster_size=40)
    world = learners.make_world(cfg, seed=0)
    for factory in sim.SAMPLER_FACTORIES.values():
        assert factory(world, cfg, 0).batch_size == cfg.ads.batch_size
    # every kind but dots, which needs a trained predictor and reference rollouts (the simulator has neither)
    assert len(made) == len(sim.SAMPLER_FACTORIES) and set(made) == set(kinds.kind_names()) - {"dots"}
