"""``ReplayGRPOTrainer``: the ADS trainer with rollout replay (``trl.replay``).

Each step: TRL rolls out the sampler's delta*B fresh prompts (their rewards feed the sampler as for any kind);
one no-grad forward gives their behaviour log-probs mu (the training model at the rollout temperature, before the
step's update); up to (1 - delta)*B groups are drawn from the buffer (from step ``warmup_steps + 1`` on, as the
official code replays from its second selection round); a no-grad forward of the current policy gives pi_old for
the replayed groups (for fresh ones pi_old = mu); the batch is fresh + replayed; then the fresh mixed-reward
groups join the buffer. The loss is ``loss.decoupled_token_loss`` reduced as the run's ``loss_type``.

The buffer is saved into every checkpoint (``ads_replay.safetensors``, covered by the checkpoint's manifest) and
restored on resume, its generator with it, so a resumed run replays exactly what the uninterrupted one would.
Each step's line in steps.jsonl gets ``replayed_groups``, ``replayed_rows``, ``replayed_staleness`` (steps since
each replayed group was rolled out), ``buffer_groups`` and ``buffer_added``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ads_core.train.errors import RunStateError
from ads_core.train.trl.dynamic import _pad_cat
from ads_core.train.trl.replay.buffer import Group, ReplayBuffer
from ads_core.train.trl.replay.loss import aggregate, decoupled_token_loss
from ads_core.train.trl.replay.options import RolloutReplayConfig
from ads_core.train.trl.trainer import ADSGRPOTrainer

BUFFER_FILE = "ads_replay.safetensors"
MERGED = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages", "num_items_in_batch")


class ReplayGRPOTrainer(ADSGRPOTrainer):
    """``ADSGRPOTrainer`` whose steps mix replayed groups into the fresh ones (see the module)."""

    def __init__(self, *args: Any, replay: RolloutReplayConfig, replay_groups: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replay_cfg = replay
        self.replay_groups = int(replay_groups)
        self.buffer = ReplayBuffer(replay.buffer_size, replay.seed)
        self._completion_rewards: np.ndarray | None = None  # the step's per-completion total rewards
        if self.run.resume_from is not None:
            self.restore_buffer(self.run.resume_from)  # the buffer the checkpoint saved, its generator with it

    # -- the buffer in checkpoints ---------------------------------------------------------------------

    def restore_buffer(self, checkpoint: str) -> None:
        """The buffer saved in CHECKPOINT (a run resumed from a checkpoint saved without replay is refused)."""
        path = Path(checkpoint) / BUFFER_FILE
        if not path.is_file():
            raise RunStateError(
                f"{path} is missing: checkpoint {checkpoint} was saved without rollout replay; resume without "
                "replay, or train under a new name",
                options=("replay", "name"),
            )
        try:
            self.buffer.load(str(path))
        except ValueError as exc:
            raise RunStateError(str(exc), options=("replay",)) from None

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        folder = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}")
        if self.args.should_save:
            os.makedirs(folder, exist_ok=True)
            self.buffer.save(os.path.join(folder, BUFFER_FILE))  # before the manifest, which then covers it
        super()._save_checkpoint(model, trial)

    # -- a step's batch ------------------------------------------------------------------------------

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        values = rewards.detach().float().cpu().numpy()
        weights = self.reward_weights.detach().float().cpu().numpy()
        self._completion_rewards = np.nansum(values * weights[None, :], axis=1)
        return rewards

    def _generate_fresh(self, inputs: Any) -> Any:
        out = super()._generate_fresh(inputs)
        if not self.model.training:
            return out
        unexpected = [k for k, v in out.items() if k not in MERGED and v is not None]
        if unexpected:
            raise RuntimeError(f"rollout replay can't carry the generation fields {unexpected} (text-only GRPO)")
        step = int(self.state.global_step) + 1
        behaviour = self._logps(out["prompt_ids"], out["prompt_mask"], out["completion_ids"], out["completion_mask"])
        fresh = self._groups(out, behaviour, step)
        replayed = self.buffer.sample(self._replay_count(len(fresh))) if step > self.replay_cfg.warmup_steps else []
        merged = self._merge(out, behaviour, replayed)
        added = self.buffer.add(fresh)
        self.step_extras |= {
            "replayed_groups": len(replayed),
            "replayed_rows": [g.row for g in replayed],
            "replayed_staleness": [step - g.step for g in replayed],
            "buffer_groups": len(self.buffer),
            "buffer_added": added,
        }
        return merged

    def _replay_count(self, fresh: int) -> int:
        """At most replay_groups, fewer so the batch still splits into the step's micro-batches."""
        want = min(self.replay_groups, len(self.buffer))
        chunks, group = int(self.args.steps_per_generation), int(self.num_generations)
        while want > 0 and ((fresh + want) * group) % chunks:
            want -= 1
        return want

    def _logps(self, prompt_ids: Any, prompt_mask: Any, completion_ids: Any, completion_mask: Any) -> torch.Tensor:
        ids = torch.cat([prompt_ids, completion_ids], dim=1)
        mask = torch.cat([prompt_mask, completion_mask], dim=1)
        with torch.no_grad():
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model, ids, mask, completion_ids.size(1), batch_size=self.args.per_device_train_batch_size
            )
        return logps.detach()

    def _groups(self, out: dict[str, Any], behaviour: torch.Tensor, step: int) -> list[Group]:
        """The fresh batch as whole groups, unpadded (the feed's draw gives each group's row)."""
        g = int(self.num_generations)
        rows = self.last_feedback.draw.rows if self.last_feedback is not None else []  # set by _calculate_rewards
        rewards = self._completion_rewards
        groups = []
        for i in range(len(out["completion_ids"]) // g):
            sl = slice(i * g, (i + 1) * g)
            prompt = out["prompt_ids"][i * g][out["prompt_mask"][i * g].bool()]
            width = max(1, int(out["completion_mask"][sl].sum(dim=1).max()))
            groups.append(
                Group(
                    row=int(rows[i]) if i < len(rows) else -1,
                    step=step,
                    prompt_ids=prompt.detach().cpu().clone(),
                    completion_ids=out["completion_ids"][sl, :width].detach().cpu().clone(),
                    completion_mask=out["completion_mask"][sl, :width].detach().cpu().clone(),
                    behaviour_logps=behaviour[sl, :width].float().cpu().clone(),
                    rewards=torch.as_tensor(rewards[sl] if rewards is not None else np.zeros(g), dtype=torch.float32),
                    advantages=out["advantages"][sl].detach().float().cpu().clone(),
                )
            )
        return groups

    def _merge(self, out: dict[str, Any], behaviour: torch.Tensor, replayed: list[Group]) -> dict[str, Any]:
        """Fresh + replayed groups as one generation batch, with behaviour and pi_old log-probs for every row."""
        device = out["completion_ids"].device
        merged = {k: out[k] for k in MERGED if k in out}
        merged["behaviour_logps"] = behaviour
        merged["replay_old_logps"] = behaviour  # fresh rollouts: pi_old = mu (the same weights, no update yet)
        if not replayed:
            return merged
        g = int(self.num_generations)
        pad = int(self._tokenizer.pad_token_id)
        prompts = [grp.prompt_ids.to(device).unsqueeze(0).expand(g, -1) for grp in replayed]
        r_prompt_ids = _pad_cat(prompts, pad, left=True)
        r_prompt_mask = _pad_cat([torch.ones_like(p) for p in prompts], 0, left=True)
        r_ids = _pad_cat([grp.completion_ids.to(device) for grp in replayed], pad, left=False)
        r_mask = _pad_cat([grp.completion_mask.to(device) for grp in replayed], 0, left=False)
        r_behaviour = _pad_cat([grp.behaviour_logps.to(device) for grp in replayed], 0.0, left=False)
        r_old = self._logps(r_prompt_ids, r_prompt_mask, r_ids, r_mask)
        merged["prompt_ids"] = _pad_cat([out["prompt_ids"], r_prompt_ids], pad, left=True)
        merged["prompt_mask"] = _pad_cat([out["prompt_mask"], r_prompt_mask.to(out["prompt_mask"].dtype)], 0, True)
        merged["completion_ids"] = _pad_cat([out["completion_ids"], r_ids], pad, left=False)
        mask = _pad_cat([out["completion_mask"], r_mask.to(out["completion_mask"].dtype)], 0, left=False)
        merged["completion_mask"] = mask
        merged["behaviour_logps"] = _pad_cat([behaviour, r_behaviour.to(behaviour.dtype)], 0.0, left=False)
        merged["replay_old_logps"] = _pad_cat([behaviour, r_old.to(behaviour.dtype)], 0.0, left=False)
        advantages = torch.cat([grp.advantages for grp in replayed]).to(device, out["advantages"].dtype)
        merged["advantages"] = torch.cat([out["advantages"], advantages])
        merged["num_items_in_batch"] = mask.sum()
        return merged

    # -- the loss ------------------------------------------------------------------------------------

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
        if "behaviour_logps" not in inputs:  # evaluation batches
            return super()._compute_loss(model, inputs)
        completion_ids, mask = inputs["completion_ids"], inputs["completion_mask"]
        ids = torch.cat([inputs["prompt_ids"], completion_ids], dim=1)
        attention = torch.cat([inputs["prompt_mask"], mask], dim=1)
        logps, entropies, _ = self._get_per_token_logps_and_entropies(
            model, ids, attention, completion_ids.size(1), compute_entropy=True
        )
        per_token = decoupled_token_loss(
            logps,
            inputs["behaviour_logps"],
            inputs["replay_old_logps"],
            inputs["advantages"],
            self.epsilon_low,
            self.epsilon_high,
        )
        accumulation = float(self.current_gradient_accumulation_steps)
        items = inputs["num_items_in_batch"] * accumulation / float(self.args.steps_per_generation)
        loss = aggregate(
            per_token,
            mask,
            self.loss_type,
            accumulation=accumulation,
            items=items,
            max_completion_length=self.max_completion_length,
        )
        m = mask.float()
        if entropies is not None:
            self._metrics["train"]["entropy"].append(float((entropies.detach() * m).sum() / m.sum().clamp(min=1.0)))
        weight = torch.exp(inputs["replay_old_logps"] - inputs["behaviour_logps"])
        self._metrics["train"]["replay/is_weight_mean"].append(float((weight * m).sum() / m.sum().clamp(min=1.0)))
        return loss
