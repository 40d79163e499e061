"""The replayed loss: the decoupled, importance-corrected clipped objective the official DOTS+RR code runs.

Per token, with mu the behaviour policy (the one that generated the rollout), pi_old the policy at the start of
this step and pi_theta the one being optimised:

    r = pi_theta / mu,   r_old = pi_old / mu,
    loss = max(-A r, -A clamp(r, r_old (1 - eps_low), r_old (1 + eps_high)))

which equals (pi_old / mu) * PPO-clip(pi_theta / pi_old): the clipping is around pi_old, and the importance weight
pi_old / mu is neither clipped nor truncated. For a fresh rollout mu = pi_old, so r_old = 1 and this is GRPO's
ordinary clipped loss. The paper writes clip(pi_theta / mu, 1 +- eps) instead; we run the code's form (the one its
reported numbers come from); docs/sampler.md says so.

``aggregate`` reduces per-token losses as TRL's ``loss_type`` does (grpo, bnpo, dr_grpo, dapo), so replay keeps the
run's aggregation.
"""

from __future__ import annotations

import torch

from ads_core.train.trl.replay.options import AGGREGATIONS


def decoupled_token_loss(
    logps: torch.Tensor,
    behaviour_logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> torch.Tensor:
    """Per-token loss (B, T); ADVANTAGES is (B,) or (B, T)."""
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    ratio = torch.exp(logps - behaviour_logps)
    ratio_old = torch.exp(old_logps - behaviour_logps)
    clipped = torch.clamp(ratio, ratio_old * (1 - eps_low), ratio_old * (1 + eps_high))
    return torch.maximum(-advantages * ratio, -advantages * clipped)


def aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    loss_type: str,
    *,
    accumulation: float = 1.0,
    items: float | torch.Tensor = 1.0,
    max_completion_length: int = 1,
) -> torch.Tensor:
    """The micro-batch's loss as TRL reduces it: grpo (mean per sequence), bnpo (mean per token), dr_grpo (sum over
    B x max_completion_length), dapo (sum over the generation batch's tokens ITEMS); ACCUMULATION divides as TRL's
    gradient accumulation does (dapo's ITEMS already spans the accumulation window)."""
    mask = mask.to(per_token.dtype)
    if loss_type == "grpo":
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean() / accumulation
    if loss_type == "bnpo":
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0) / accumulation
    if loss_type == "dr_grpo":
        return (per_token * mask).sum() / (per_token.size(0) * max_completion_length) / accumulation
    if loss_type == "dapo":
        return (per_token * mask).sum() / torch.as_tensor(items, dtype=per_token.dtype).clamp(min=1.0)
    raise ValueError(f"rollout replay supports loss_type {', '.join(AGGREGATIONS)}; got {loss_type!r}")
