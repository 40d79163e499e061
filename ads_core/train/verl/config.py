"""Compose, finish and validate the verl config of an ADS run (Hydra compose API, same YAML as the entry point)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from pydantic import ValidationError

from ads_core.config.base import error_line
from ads_core.config.sampler import ADSSamplerConfig
from ads_core.sampler.kinds import has_extra_rollouts, kind_names, kind_spec
from ads_core.train.options import TrainSamplerConfig
from ads_core.train.verl.options import INTEGRATION_KEYS

CONFIG_DIR = Path(__file__).resolve().parent / "config"
CONFIG_NAME = "ads_grpo"
ENTRY_MODULE = "ads_core.train.verl.main"


class ConfigError(ValueError):
    """The composed config cannot run an ADS training (a clear, user-facing message)."""


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """The config `python -m ads_core.train.verl.main <overrides>` would receive, before `finalize`."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None, job_name="ads_train"):
            return hydra_compose(config_name=CONFIG_NAME, overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()


def sampler_config(data_config: Any) -> ADSSamplerConfig:
    """ADSSamplerConfig from ``data.ads_sampler`` (unknown keys are an error, integration keys are skipped)."""
    raw = data_config.get("ads_sampler") or {}
    values = OmegaConf.to_container(raw, resolve=True) if isinstance(raw, DictConfig) else dict(raw)
    known = set(ADSSamplerConfig.model_fields)
    unknown = sorted(set(values) - known - set(INTEGRATION_KEYS))
    if unknown:
        raise ConfigError(f"unknown data.ads_sampler keys {unknown}; known: {sorted(known | set(INTEGRATION_KEYS))}")
    try:
        return ADSSamplerConfig(**{k: v for k, v in values.items() if k in known})
    except ValidationError as exc:
        raise ConfigError(f"invalid {error_line(exc, 'data.ads_sampler.')}") from None


def sampler_section(data_config: Any) -> TrainSamplerConfig:
    """The sampler a run draws with: ``data.sampler_kind`` (ads by default), the ADS knobs from
    ``data.ads_sampler`` and a baseline's from ``data.baseline_samplers.<section>`` (its section in the config
    tree: the kind's name, `-` as `_`; its batch is the step's)."""
    kind = str(data_config.get("sampler_kind") or "ads")
    if kind not in kind_names():
        raise ConfigError(f"data.sampler_kind={kind!r} is not a sampler kind; choose one of {', '.join(kind_names())}")
    if has_extra_rollouts(kind):
        raise ConfigError(
            f"data.sampler_kind={kind}: its steps roll out extra generation batches (DAPO-style dynamic sampling), "
            "which in verl is algorithm.filter_groups of the v1 trainer only; the ADS integration drives the v0 "
            "trainer, so train this kind with trainer trl"
        )
    if kind_spec(kind).needs:  # a trainer extension the ADS integration of verl does not have
        raise ConfigError(
            f"data.sampler_kind={kind} needs {', '.join(sorted(kind_spec(kind).needs))}: train it with trl"
        )
    raw = data_config.get("baseline_samplers") or {}
    baselines = OmegaConf.to_container(raw, resolve=True) if isinstance(raw, DictConfig) else dict(raw)
    try:
        return TrainSamplerConfig(kind=kind, ads=sampler_config(data_config), **baselines)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigError(f"invalid {error_line(exc, 'data.baseline_samplers.')}") from None


def finalize(config: DictConfig) -> DictConfig:
    """Apply the ADS rules to a composed config, in place; raise ConfigError with a clear message if it can't run.

    * ``data.train_batch_size``: null -> the sampler's batch (active_clusters x mini_cluster_size); anything
      else must equal it, because verl's dataloader cuts fixed-size batches from the sampler's stream.
    * ``data.gen_batch_size`` must be null or equal to the batch (verl prefers it for the dataloader).
    * ``data.dataloader_num_workers`` is forced to 0 (prefetching workers would run ahead of the updates).
    * ``trainer.use_v1`` must be false, ``trainer.critic_warmup`` 0 (the update hook runs with the actor update).
    """
    sampler_section(config.data)  # a kind verl can draw with, and valid knobs
    cfg = sampler_config(config.data)
    batch = cfg.batch_size  # every kind draws the ADS batch
    with open_dict(config):
        tbs = config.data.get("train_batch_size")
        if tbs is None:
            config.data.train_batch_size = batch
        elif int(tbs) != batch:
            raise ConfigError(
                f"data.train_batch_size={tbs} does not match the ADS sampler's batch "
                f"(active_clusters {cfg.active_clusters} x mini_cluster_size {cfg.mini_cluster_size} = {batch}); "
                f"leave data.train_batch_size unset (null) or change data.ads_sampler.*"
            )
        gbs = config.data.get("gen_batch_size")
        if gbs is not None and int(gbs) != batch:
            raise ConfigError(f"data.gen_batch_size={gbs} must be null or equal the ADS batch {batch}")
        config.data.dataloader_num_workers = 0
    if config.trainer.get("use_v1", False):
        raise ConfigError(
            "trainer.use_v1=true is not supported: the ADS integration drives verl's v0 trainer "
            "(see docs/training.md); remove the override"
        )
    if int(config.trainer.get("critic_warmup", 0) or 0) > 0:
        raise ConfigError("trainer.critic_warmup must be 0 with ADS: the sampler is updated with the actor update")
    mini = int(config.actor_rollout_ref.actor.ppo_mini_batch_size)
    if mini <= 0 or batch % mini:
        raise ConfigError(
            f"actor_rollout_ref.actor.ppo_mini_batch_size={mini} must divide the ADS batch {batch} "
            f"(prompts per step); pick a divisor of {batch}"
        )
    interval = config.data.ads_sampler.get("cluster_metrics_interval", 0)
    if interval is None or int(interval) < 0:
        raise ConfigError("data.ads_sampler.cluster_metrics_interval must be >= 0")
    return config


def validate(config: DictConfig) -> None:
    """verl's own checks, exactly as ``verl.trainer.main_ppo.main`` runs them."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


def resolve(overrides: Sequence[str] = (), check: bool = True) -> DictConfig:
    """compose + finalize (+ verl's validation): the config an ADS run trains with."""
    config = finalize(compose(overrides))
    if check:
        validate(config)
    return config


def to_yaml(config: DictConfig) -> str:
    """The resolved config as YAML (interpolations resolved; mandatory-but-unset values stay ???)."""
    return OmegaConf.to_yaml(config, resolve=True)
