"""Hydra entry point: ``python -m ads_core.train.verl.main <overrides>`` trains GRPO with the ADS sampler.

It mirrors ``verl.trainer.main_ppo.main`` (``auto_set_device``, ``validate_config``, ``run_ppo``), with our
config (``config/ads_grpo.yaml``, which extends verl's ``ppo_trainer``) and our task runner. A bad config or a
sampler batch that is not the step's row positions ends it with one ``error:`` line and status 2.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from ads_core.sampler.base import SamplerBatchError
from ads_core.train.verl.config import CONFIG_NAME, ConfigError, finalize, validate


def run(config: DictConfig) -> None:
    import ray
    from verl.trainer.main_ppo import run_ppo
    from verl.utils.device import auto_set_device

    from ads_core.train.verl.task_runner import ADSTaskRunner

    auto_set_device(config)
    validate(config)
    run_ppo(config, task_runner_class=ray.remote(ADSTaskRunner))


@hydra.main(config_path="config", config_name=CONFIG_NAME, version_base=None)
def main(config: DictConfig) -> None:
    try:
        finalize(config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    try:
        run(config)
    except SamplerBatchError as exc:  # raised in Ray's task runner; Ray's error is an instance of it too
        print(f"error: {getattr(exc, 'cause', exc)}", file=sys.stderr)  # the sampler's line, not Ray's traceback
        sys.exit(2)


if __name__ == "__main__":
    main()
