"""Compose, finish and validate the verl config of an ADS run (Hydra compose API, same YAML as the entry point).

The sampler is not in this config: it is the run's sampler.json (`sampler_file`), which ``ads.sampler_file``
names; `run_sampler` reads it, and `finalize` sizes the batch from it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from ads_core.train.verl import sampler_file as sf
from ads_core.train.verl.sampler_file import RunSampler

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


def run_sampler(config: Any) -> RunSampler:
    """The sampler the run draws with: the file ``ads.sampler_file`` names (RUN_DIR/sampler.json, written by
    `ads train`), or every default when it names none."""
    refuse_second_setting(config)
    path = (config.get("ads") or {}).get("sampler_file")
    try:
        return sf.read(str(path)) if path else sf.default_run_sampler()
    except sf.SamplerFileError as exc:
        raise ConfigError(str(exc)) from None


def refuse_second_setting(config: Any) -> None:
    """A config that still sets the sampler through ``data.ads_sampler`` / ``data.baseline_samplers`` /
    ``data.sampler_kind`` (e.g. ``+data.ads_sampler.alpha=0.5`` given to the entry point) is refused."""
    data = config.get("data") or {}
    former = [f"data.{key}" for key in data if sf.former_key(f"data.{key}")]
    if former:
        raise ConfigError(
            f"{', '.join(former)}: the verl task reads the sampler only from {sf.HYDRA_KEY} (the run's "
            f"{sf.FILE}, written by `ads train` from its sampler options); remove {', '.join(former)}"
        )


def finalize(config: DictConfig, run: RunSampler | None = None) -> DictConfig:
    """Apply the ADS rules to a composed config, in place; raise ConfigError with a clear message if it can't run.
    RUN is the run's sampler (default: `run_sampler(config)`, the file the config names).

    * ``data.train_batch_size``: null -> the sampler's batch (active_clusters x mini_cluster_size); anything
      else must equal it, because verl's dataloader cuts fixed-size batches from the sampler's stream.
    * ``data.gen_batch_size`` must be null or equal to the batch (verl prefers it for the dataloader).
    * ``data.dataloader_num_workers`` is forced to 0 (prefetching workers would run ahead of the updates).
    * ``trainer.use_v1`` must be false, ``trainer.critic_warmup`` 0 (the update hook runs with the actor update).
    """
    refuse_second_setting(config)
    run = run or run_sampler(config)  # a kind verl can draw with, and valid knobs
    cfg = run.sampler.ads
    batch = run.batch_size  # every kind draws the ADS batch
    with open_dict(config):
        tbs = config.data.get("train_batch_size")
        if tbs is None:
            config.data.train_batch_size = batch
        elif int(tbs) != batch:
            raise ConfigError(
                f"data.train_batch_size={tbs} does not match the ADS sampler's batch "
                f"(active_clusters {cfg.active_clusters} x mini_cluster_size {cfg.mini_cluster_size} = {batch}); "
                "leave data.train_batch_size unset (null) or change sampler.ads.active_clusters or "
                "sampler.ads.mini_cluster_size"
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
    return config


def validate(config: DictConfig) -> None:
    """verl's own checks, exactly as ``verl.trainer.main_ppo.main`` runs them."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


def resolve(overrides: Sequence[str] = (), check: bool = True, run: RunSampler | None = None) -> DictConfig:
    """compose + finalize (+ verl's validation): the config an ADS run trains with (RUN: its sampler, when the
    file the config names is not written yet, as in a dry run)."""
    config = finalize(compose(overrides), run)
    if check:
        validate(config)
    return config


def to_yaml(config: DictConfig) -> str:
    """The resolved config as YAML (interpolations resolved; mandatory-but-unset values stay ???)."""
    return OmegaConf.to_yaml(config, resolve=True)
