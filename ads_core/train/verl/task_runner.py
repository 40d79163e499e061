"""``ADSTaskRunner``: verl 0.9's v0 ``TaskRunner.run`` with the ADS sampler and trainer subclass swapped in.

verl's ``main_ppo_v0.TaskRunner`` is decorated with ``@ray.remote`` and can't be subclassed, so this
derives from the plain ``BaseTaskRunner`` (worker, resource-pool and role helpers) and repeats the ~40
lines of ``run`` that build the tokenizer, datasets and trainer. The contract test pins the helpers used.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from verl.trainer.main_ppo_v0 import BaseTaskRunner


class ADSTaskRunner(BaseTaskRunner):
    """Runs inside a Ray actor (``ray.remote(ADSTaskRunner)``); the sampler lives here, next to the trainer."""

    def run(self, config: Any) -> None:
        from pprint import pprint

        from omegaconf import OmegaConf
        from verl.trainer.ppo.utils import create_rl_dataset, need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.utils.dataset.rl_dataset import collate_fn
        from verl.workers.config import HFModelConfig

        from ads_core.grading.api import start_verifier
        from ads_core.train.verl.config import finalize, run_sampler
        from ads_core.train.verl.sampler import ADSVerlSampler
        from ads_core.train.verl.trainer import ADSRayPPOTrainer

        print(f"ADSTaskRunner hostname: {socket.gethostname()}, PID: {os.getpid()}")
        # the math reward's verifier starts now, minutes before the first rewards: a grade never waits for it past
        # its time limit, so a cold verifier would score the first symbolic answers as timeouts (as TRL's run does)
        start_verifier()
        run = run_sampler(config)  # RUN_DIR/sampler.json: the sampler exactly as `ads train` resolved it
        finalize(config, run)  # idempotent; also guards runs launched with a hand-written config
        metrics_file = config.get("ads", {}).get("metrics_file")
        if metrics_file:
            # verl's `file` logger reads this in the trainer process (this actor), not in the launcher
            os.makedirs(os.path.dirname(os.path.abspath(metrics_file)), exist_ok=True)
            os.environ["VERL_FILE_LOGGER_PATH"] = str(metrics_file)
        pprint(OmegaConf.to_container(config, resolve=True))
        OmegaConf.resolve(config)

        actor_rollout_cls, ray_worker_group_cls = self.add_actor_rollout_worker(config)
        self.add_critic_worker(config)
        self.add_reward_model_resource_pool(config)
        self.add_teacher_model_resource_pool(config)
        self.add_ref_policy_worker(config, actor_rollout_cls)

        validate_config(
            config=config,
            use_reference_policy=need_reference_policy(config),
            use_critic=need_critic(config),
        )

        model_config: HFModelConfig = omega_conf_to_dataclass(config.actor_rollout_ref.model)
        tokenizer = model_config.tokenizer
        processor = model_config.processor

        resource_pool_manager = self.init_resource_pool_mgr(config)

        train_dataset = create_rl_dataset(
            config.data.train_files,
            config.data,
            tokenizer,
            processor,
            is_train=True,
            max_samples=config.data.get("train_max_samples", -1),
        )
        val_dataset = create_rl_dataset(
            config.data.val_files,
            config.data,
            tokenizer,
            processor,
            is_train=False,
            max_samples=config.data.get("val_max_samples", -1),
        )
        # The only functional difference from verl's TaskRunner: our sampler and trainer.
        train_sampler = ADSVerlSampler.from_dataset(train_dataset, run)
        print(
            f"[ads] sampler {train_sampler.kind}: {train_sampler.n_rows} rows, "
            f"batch {train_sampler.batch_size}, {train_sampler.steps_per_epoch} steps per epoch"
        )

        trainer = ADSRayPPOTrainer(
            config=config,
            tokenizer=tokenizer,
            processor=processor,
            role_worker_mapping=self.role_worker_mapping,
            resource_pool_manager=resource_pool_manager,
            ray_worker_group_cls=ray_worker_group_cls,
            train_dataset=train_dataset,
            val_dataset=val_dataset,
            collate_fn=collate_fn,
            train_sampler=train_sampler,
        )
        trainer.init_workers()
        trainer.fit()
