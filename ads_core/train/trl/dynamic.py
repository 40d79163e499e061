"""DAPO-style dynamic sampling inside TRL's step: drop groups whose rewards all agree, draw and roll out again.

TRL generates one generation batch per optimizer step (the dataloader's batch, drawn by ``FeedbackSampler``).
With a ``GroupFilter`` sampler (kind ``dynamic``), ``ADSGRPOTrainer._generate_and_score_completions`` hands that
batch to ``fill_generation_batch``, which works like verl's ``algorithm.filter_groups`` and the simulator's
``fill_step``:

1. roll out the batch with TRL's own ``_generate_and_score_completions`` (generation, rewards, the group
   advantages); its rewards reach the sampler through ``_calculate_rewards`` as for every kind;
2. while fewer than ``prompts_per_step`` groups are informative (0 < mean correctness < 1) and fewer than
   ``max_draws`` generation batches were rolled out, draw another batch from the sampler (``draw_extra``), roll it
   out the same way (its rewards are fed back at once, ``feedback_extra``), and count it;
3. train on ``prompts_per_step`` groups chosen by ``select_groups`` (informative ones in draw order, topped up with
   dropped ones when ``max_draws`` ran out), so the optimizer step has its usual shape.

A group's advantages depend only on its own rewards (TRL's ``scale_rewards="group"``, the default; other
settings are refused), so picking whole groups out of several generation batches keeps every advantage exact; the
token count that normalises the loss is recomputed for the picked completions. Surplus informative groups of the
last batch are rolled out and not trained on, as in verl. One process only: the picked groups would otherwise have
to move between processes (the plan refuses kind ``dynamic`` with more than one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ads_core.sampler.dynamic import select_groups
from ads_core.train.trl.feed import Draw, Feedback

Generate = Callable[[list[dict[str, Any]]], dict[str, Any]]  # TRL's _generate_and_score_completions
Rollout = Callable[[list[dict[str, Any]], Draw | None], tuple[dict[str, Any], Feedback]]

LEFT_PADDED = {"prompt_ids": "pad", "prompt_mask": 0}  # field -> padding value ("pad": the pad token id)
RIGHT_PADDED = {
    "completion_ids": "pad",
    "completion_mask": 0,
    "old_per_token_logps": 0.0,
    "ref_per_token_logps": 0.0,
    "sampling_per_token_logps": 0.0,
}
PER_COMPLETION = {"advantages"}


def fill_generation_batch(
    first: list[dict[str, Any]],
    rollout: Rollout,
    draw_extra: Callable[[], Draw],
    inputs_for: Callable[[list[int]], list[dict[str, Any]]],
    keep: Callable[[np.ndarray], np.ndarray],
    need: int,
    max_draws: int,
    num_generations: int,
    pad_token_id: int,
) -> tuple[dict[str, Any], Feedback]:
    """One optimizer step's generation batch under dynamic sampling, and the step's feedback (its trained
    prompts, plus how many generation batches and prompts it rolled out)."""
    outputs, feedbacks = [], []
    out, fb = rollout(first, None)
    outputs.append(out)
    feedbacks.append(fb)
    masks = [np.asarray(keep(fb.group_success), dtype=bool)]
    while sum(int(m.sum()) for m in masks) < need and len(outputs) < max_draws:
        draw = draw_extra()
        out, fb = rollout(inputs_for(draw.rows), draw)
        outputs.append(out)
        feedbacks.append(fb)
        masks.append(np.asarray(keep(fb.group_success), dtype=bool))
    picks = select_groups(masks, need)
    merged = merge_groups(outputs, picks, num_generations, pad_token_id)
    return merged, step_feedback(feedbacks, picks, num_generations)


def step_feedback(feedbacks: list[Feedback], picks: list[tuple[int, int]], num_generations: int) -> Feedback:
    """The step's feedback: the trained groups' prompts (each once, in pick order) with their mean correctness
    and reward, and what the step rolled out. The sampler already had every generation batch's feedback."""
    rows: list[int] = []
    success: dict[int, list[float]] = {}
    reward: dict[int, list[float]] = {}
    for d, g in picks:
        fb = feedbacks[d]
        row = int(fb.draw.rows[g])
        at = int(np.flatnonzero(fb.rows == row)[0])
        if row not in success:
            rows.append(row)
        success.setdefault(row, []).append(float(fb.success[at]))
        reward.setdefault(row, []).append(float(fb.rewards[at]))
    first = feedbacks[0]
    return Feedback(
        draw=first.draw,
        rows=np.asarray(rows, dtype=np.int64),
        success=np.array([np.mean(success[r]) for r in rows]),
        rewards=np.array([np.mean(reward[r]) for r in rows]),
        completions=len(picks) * num_generations,
        group_success=np.concatenate([fb.group_success for fb in feedbacks]),
        rollout_batches=len(feedbacks),
        rollout_prompts=sum(fb.rollout_prompts for fb in feedbacks),
        trained=np.array([float(feedbacks[d].group_success[g]) for d, g in picks]),
    )


def merge_groups(
    outputs: list[dict[str, Any]], picks: list[tuple[int, int]], num_generations: int, pad_token_id: int
) -> dict[str, Any]:
    """TRL's generation-batch dict for the picked groups of several rolled-out batches: each per-completion
    tensor keeps the picked rows (padded to a common width), ``num_items_in_batch`` is recounted."""
    merged: dict[str, Any] = {}
    for key in outputs[0]:
        if key == "num_items_in_batch":
            continue
        if key in LEFT_PADDED or key in RIGHT_PADDED or key in PER_COMPLETION:
            parts = [_rows(outputs[d][key], g, num_generations) for d, g in picks]
            if key in PER_COMPLETION:
                merged[key] = torch.cat(parts)
            else:
                left = key in LEFT_PADDED
                fill = (LEFT_PADDED if left else RIGHT_PADDED)[key]
                merged[key] = _pad_cat(parts, pad_token_id if fill == "pad" else fill, left)
        elif outputs[0][key] is not None:
            raise RuntimeError(
                f"dynamic sampling under TRL: can't merge the generation field {key!r} (text-only GRPO without "
                "tools or images is supported); use another sampler kind"
            )
    merged["num_items_in_batch"] = merged["completion_mask"].sum()  # the loss's token normaliser (one process)
    return merged


def _rows(tensor: torch.Tensor, group: int, num_generations: int) -> torch.Tensor:
    return tensor[group * num_generations : (group + 1) * num_generations]


def _pad_cat(parts: list[torch.Tensor], value: float, left: bool) -> torch.Tensor:
    width = max(p.shape[1] for p in parts)
    padded = []
    for p in parts:
        extra = width - p.shape[1]
        if extra:
            pad = torch.full((p.shape[0], extra), value, dtype=p.dtype, device=p.device)
            p = torch.cat([pad, p] if left else [p, pad], dim=1)
        padded.append(p)
    return torch.cat(padded)
