"""Contract with verl: every symbol, signature and ordering the ADS integration relies on.

When a verl release moves one of these, this file fails with the name of what moved, before any GPU run.
The pinned range is the `train` extra's (verl[verl-core]>=0.9.1,<0.10).
"""

from __future__ import annotations

import inspect
import re
from importlib.metadata import version

import pytest

pytest.importorskip("verl")

from packaging.version import Version  # noqa: E402


def params(func) -> list[str]:
    """Parameter names; Ray's tracing wrapper adds `_ray_trace_ctx` to actor-class methods, ignore it."""
    return [p for p in inspect.signature(func).parameters if p != "_ray_trace_ctx"]


def source(func) -> str:
    return inspect.getsource(func)


def test_verl_version_is_in_the_supported_range():
    """The range the integration claims is the one the `train` extra pins, and the installed verl is in it."""
    import tomllib
    from pathlib import Path

    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    from ads_core.train.verl import SUPPORTED_VERL

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    pins = [Requirement(r) for r in pyproject["project"]["optional-dependencies"]["train"]]
    verl_pins = [r for r in pins if r.name == "verl"]
    assert len(verl_pins) == 1, f"the train extra should pin verl once: {pins}"
    assert verl_pins[0].specifier == SpecifierSet(SUPPORTED_VERL), (
        f"the train extra pins verl{verl_pins[0].specifier}, the integration claims {SUPPORTED_VERL}"
    )
    v = Version(version("verl"))
    assert v in SpecifierSet(SUPPORTED_VERL), f"verl {v} is outside the tested range {SUPPORTED_VERL}"


def test_ray_ppo_trainer_methods_we_override_or_call():
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    init = params(RayPPOTrainer.__init__)
    for name in (
        "config",
        "tokenizer",
        "role_worker_mapping",
        "resource_pool_manager",
        "ray_worker_group_cls",
        "processor",
        "train_dataset",
        "val_dataset",
        "collate_fn",
        "train_sampler",
    ):
        assert name in init, f"RayPPOTrainer.__init__ lost {name!r}"
    assert params(RayPPOTrainer._update_actor) == ["self", "batch"]
    assert params(RayPPOTrainer._save_checkpoint) == ["self"]
    assert params(RayPPOTrainer._load_checkpoint) == ["self"]
    assert params(RayPPOTrainer._create_dataloader) == [
        "self",
        "train_dataset",
        "val_dataset",
        "collate_fn",
        "train_sampler",
    ]
    assert params(RayPPOTrainer._get_gen_batch) == ["self", "batch"]
    for name in ("fit", "init_workers", "_validate"):
        assert callable(getattr(RayPPOTrainer, name))


def test_fit_updates_the_actor_before_it_saves_the_checkpoint():
    """Our sampler update runs inside _update_actor, so data.pt must be written after it."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    src = source(RayPPOTrainer.fit)
    update = src.index("self._update_actor(batch)")
    save = src.index("self._save_checkpoint()")
    assert update < save, "fit now saves the checkpoint before _update_actor: the saved sampler would be stale"
    assert src.count("self._update_actor(") == 1
    assert 'actor_output.meta_info["metrics"]' in src, "fit no longer logs _update_actor's metrics"
    assert "for batch_dict in self.train_dataloader" in src
    assert "critic_warmup" in src  # the reason finalize() requires trainer.critic_warmup == 0


def test_train_dataloader_takes_our_sampler():
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    src = source(RayPPOTrainer._create_dataloader)
    assert "StatefulDataLoader(" in src
    assert "sampler=train_sampler" in src
    assert re.search(r"if train_sampler is None:\s*\n\s*train_sampler = create_rl_sampler", src)
    assert "drop_last=True" in src
    assert 'self.config.data.get("gen_batch_size", None) or self.config.data.train_batch_size' in src


def test_checkpoint_layout_we_read_and_write():
    import torch
    from verl.trainer.ppo import ray_trainer
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    save = source(RayPPOTrainer._save_checkpoint)
    assert 'f"global_step_{self.global_steps}"' in save and '"data.pt"' in save
    assert "self.train_dataloader.state_dict()" in save
    load = source(RayPPOTrainer._load_checkpoint)
    assert '"data.pt"' in load and "self.train_dataloader.load_state_dict" in load
    assert 'global_step_folder.split("global_step_")[-1]' in load  # sets self.global_steps
    assert "resume_from_path" in load and "find_latest_ckpt_path" in load
    # weights_only_data_pt() makes this read safe by swapping the module's name `torch` while it runs
    assert re.search(r"torch\.load\(dataloader_local_path\b", load), "verl reads data.pt differently now"
    assert ray_trainer.torch is torch


def test_gen_batch_keeps_extra_info_and_uid():
    """Row identity reaches the update hook only through extra_info (custom columns are popped)."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    src = source(RayPPOTrainer._get_gen_batch)
    for key in ("data_source", "reward_model", "extra_info", "uid"):
        assert f'"{key}"' in src


def test_task_runner_helpers():
    from verl.trainer import main_ppo_v0
    from verl.trainer.main_ppo_v0 import BaseTaskRunner

    for name in (
        "add_actor_rollout_worker",
        "add_critic_worker",
        "add_reward_model_resource_pool",
        "add_teacher_model_resource_pool",
        "init_resource_pool_mgr",
    ):
        assert params(getattr(BaseTaskRunner, name)) == ["self", "config"], name
    assert params(BaseTaskRunner.add_ref_policy_worker) == ["self", "config", "ref_policy_cls"]
    assert not hasattr(BaseTaskRunner, "remote"), "BaseTaskRunner became a Ray actor class"
    # the v0 runner we mirror: same calls, in the same roles
    run = source(
        main_ppo_v0.TaskRunner.run
        if hasattr(main_ppo_v0.TaskRunner, "run")
        else main_ppo_v0.TaskRunner.__ray_metadata__.modified_class.run
    )
    for call in (
        "create_rl_dataset(",
        "create_rl_sampler(",
        "RayPPOTrainer(",
        "trainer.init_workers()",
        "trainer.fit()",
        "omega_conf_to_dataclass(config.actor_rollout_ref.model)",
    ):
        assert call in run, f"verl's TaskRunner.run no longer does {call}: update ADSTaskRunner.run"


def test_entry_point_functions():
    from verl.trainer import main_ppo
    from verl.trainer.ppo import utils
    from verl.utils import config, device
    from verl.utils.dataset import rl_dataset

    assert params(main_ppo.run_ppo) == ["config", "task_runner_class"]
    assert "task_runner_class.remote()" in source(main_ppo.run_ppo)
    assert params(config.validate_config) == ["config", "use_reference_policy", "use_critic"]
    assert params(device.auto_set_device) == ["config"]
    assert params(utils.create_rl_dataset) == [
        "data_paths",
        "data_config",
        "tokenizer",
        "processor",
        "is_train",
        "max_samples",
    ]
    assert params(utils.need_critic) == ["config"] and params(utils.need_reference_policy) == ["config"]
    assert callable(rl_dataset.collate_fn) and hasattr(rl_dataset, "RLHFDataset")
    from verl.workers.config import HFModelConfig  # noqa: F401


def test_curriculum_plugin_is_still_gone():
    """If verl brings a sampler plug-in back, revisit the design (docs/training.md)."""
    with pytest.raises(ModuleNotFoundError):
        __import__("verl.experimental.dataset.sampler")


def test_our_config_keys_exist_in_verls_config():
    """Keys our YAML sets without `+` must exist in verl's ppo_trainer (Hydra would reject them otherwise)."""
    from ads_core.train.verl.config import compose

    cfg = compose(["data.train_files=/x.parquet", "actor_rollout_ref.model.path=/m"])
    assert cfg.trainer.use_v1 is False and cfg.data.dataloader_num_workers == 0
    assert cfg.reward.custom_reward_function.path == "pkg://ads_core.train.reward"
    assert cfg.reward.reward_manager.name == "naive"


def test_reward_function_loads_and_acc_reaches_the_batch(tmp_path, policy_model: str):
    """verl loads compute_score from pkg://, and the naive reward manager copies our `acc` into the extras:
    1 for a correct final answer, 0 for a wrong one and for none at all."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from ads_core.train.verl.config import compose

    cfg = compose(["data.train_files=/x.parquet", f"actor_rollout_ref.model.path={policy_model}"])
    fn = get_custom_reward_fn(cfg)
    assert fn(data_source="x", solution_str="\\boxed{1/2}", ground_truth="0.5") == {
        "score": 1.0,
        "acc": 1.0,
        "has_boxed": 1.0,
    }
    tokenizer = AutoTokenizer.from_pretrained(policy_model)
    manager = get_reward_manager_cls("naive")(cfg, tokenizer, fn)

    def reward_of(response_text: str, ground_truth: str) -> dict:
        prompt = torch.tensor([tokenizer.encode("q")])
        response = torch.tensor([tokenizer.encode(response_text)])
        data = DataProto.from_dict(
            tensors={
                "prompts": prompt,
                "responses": response,
                "attention_mask": torch.ones(1, prompt.shape[1] + response.shape[1], dtype=torch.long),
            },
            non_tensors={
                "data_source": np.array(["gsm8k"], dtype=object),
                "reward_model": np.array([{"ground_truth": ground_truth}], dtype=object),
                "extra_info": np.array([{"sample_id": 1}], dtype=object),
            },
        )
        return manager.loop.run_until_complete(manager.run_single(data))

    right = reward_of("so the answer is \\boxed{350}", "350")
    wrong = reward_of("so the answer is \\boxed{351}", "350")
    unboxed = reward_of("so the answer is 350", "350")
    assert set(right["reward_extra_info"]) >= {"score", "acc"}
    assert (right["reward_extra_info"]["acc"], right["reward_extra_info"]["score"]) == (1.0, 1.0)
    assert (wrong["reward_extra_info"]["acc"], wrong["reward_extra_info"]["score"]) == (0.0, 0.0)
    assert unboxed["reward_extra_info"]["acc"] == 0.0 and unboxed["reward_extra_info"]["has_boxed"] == 0.0
