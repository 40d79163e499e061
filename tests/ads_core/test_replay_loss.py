"""The replayed loss against GRPO's ordinary clipped loss, written out here independently."""

from __future__ import annotations

import torch

from ads_core.train.trl.replay.loss import aggregate, decoupled_token_loss


def grpo_token_loss(logps, old_logps, advantages, eps):
    ratio = torch.exp(logps - old_logps)
    a = advantages.unsqueeze(1)
    return -torch.minimum(ratio * a, torch.clamp(ratio, 1 - eps, 1 + eps) * a)


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(6, 5, generator=g) * 3
    logps = (old + 0.4 * torch.randn(6, 5, generator=g)).requires_grad_()  # ratios well outside 1 +- 0.2
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, 0.0])
    mask = torch.ones(6, 5)
    mask[2, 3:] = 0
    return logps, old, adv, mask


def test_with_behaviour_equal_to_the_current_old_policy_it_is_grpo_loss_value_and_gradient():
    logps, old, adv, mask = _batch()
    for loss_type in ("grpo", "bnpo", "dapo"):
        ours = aggregate(decoupled_token_loss(logps, old, old, adv, 0.2, 0.2), mask, loss_type, items=mask.sum())
        ref = aggregate(grpo_token_loss(logps, old, adv, 0.2), mask, loss_type, items=mask.sum())
        (g1,) = torch.autograd.grad(ours, logps)
        (g2,) = torch.autograd.grad(ref, logps)
        assert torch.allclose(ours, ref, atol=1e-7) and torch.allclose(g1, g2, atol=1e-7)
    assert abs(float(ref.detach())) > 1e-3  # clipping is active in this batch: not a trivial equality
    assert bool((torch.exp(logps - old) > 1.2).any())


def test_a_stale_behaviour_policy_weights_ppo_clip_around_old_by_old_over_behaviour():
    logps, old, adv, mask = _batch(1)
    behaviour = old - 0.3 * torch.randn(6, 5, generator=torch.Generator().manual_seed(2))
    ours = decoupled_token_loss(logps, behaviour, old, adv, 0.2, 0.28)
    ratio = torch.exp(logps - old)
    a = adv.unsqueeze(1)
    ppo = -torch.minimum(ratio * a, torch.clamp(ratio, 1 - 0.2, 1 + 0.28) * a)
    expected = torch.exp(old - behaviour) * ppo  # the unclipped importance weight pi_old / mu
    assert torch.allclose(ours, expected, atol=1e-6)
    assert not torch.allclose(ours, ppo, atol=1e-3)  # the correction matters here


def test_replay_refuses_what_it_cannot_train_with_in_one_line():
    import pytest

    from ads_core.train.errors import TrainOptionError
    from ads_core.train.options import TrainConfig
    from ads_core.train.trl.replay.options import RolloutReplayConfig, check_replay

    check_replay(TrainConfig(trl={"replay": True}), "dots")  # the defaults train
    bad = TrainConfig(trl={"replay": True, "beta": 0.1, "loss_type": "cispo", "processes": 2})
    with pytest.raises(TrainOptionError) as info:
        check_replay(bad, "dynamic")
    line = str(info.value)
    assert "\n" not in line and line.startswith("rollout replay (replay) can't train with processes 2")
    assert "beta 0.1" in line and "loss_type cispo" in line and "sampler dynamic" in line
    assert [RolloutReplayConfig(fresh_fraction=f).fresh_prompts(8) for f in (0.5, 0.25, 0.01, 1.0)] == [4, 2, 1, 8]
